// ctxtier console: polls /ui/api/* and renders the page. No framework, no
// build step; every value is written with textContent (never as HTML).
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const POLL_MS = 2000, SERIES_MS = 5000;
  const state = { key: sessionStorage.getItem("ctxtier-admin-key") || "", admin: false, pick: "", self: "",
    drainHist: {}, repairHist: [], members: [], lastOverview: null, nsSort: { key: "bytes", dir: -1 }, scope: "cluster" };

  const fmtBytes = (n) => {
    if (n === undefined || n === null || isNaN(n)) return "—";
    const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]; let i = 0; let v = Number(n);
    while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v.toFixed(0) : v.toFixed(1)) + " " + u[i];
  };
  const fmtNum = (n) => (n === undefined || n === null || isNaN(n)) ? "—" : Number(n).toLocaleString("en-US");
  const fmtDur = (s) => {
    if (!isFinite(s) || s < 0) return "—";
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  };
  const el = (tag, text, attrs) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  };
  const cell = (text, value, cls) => {
    const td = el("td", text, value === undefined ? {} : { "data-value": String(value) });
    if (cls) td.className = cls;
    return td;
  };
  const setFact = (id, text, value) => { const d = $(id); d.textContent = text; d.dataset.value = value === undefined ? "" : String(value); };
  const emptyRow = (tb, text, cols) => { const tr = el("tr"); tr.append(el("td", text, { colspan: String(cols) })); tb.append(tr); };
  const alert = (msg) => { const a = $("alert"); a.hidden = !msg; a.textContent = msg || ""; };
  const announce = (msg) => { $("live").textContent = msg; };

  async function api(path, opts) {
    const o = Object.assign({ headers: {} }, opts || {});
    if (state.key) o.headers["Authorization"] = "Bearer " + state.key;
    const r = await fetch(path, o);
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.message || ("HTTP " + r.status));
    return body;
  }

  // rate returns units per second over a history of [t, value] (value falling).
  function rate(hist) {
    if (hist.length < 2) return NaN;
    const [t0, v0] = hist[0], [t1, v1] = hist[hist.length - 1];
    return t1 > t0 ? (v0 - v1) / ((t1 - t0) / 1000) : NaN;
  }
  function pushHist(h, t, v) { h.push([t, v]); while (h.length > 30) h.shift(); }

  function renderCluster(ov) {
    const st = ov.cluster;
    state.self = ov.node_id; $("self").textContent = ov.node_id;
    state.members = st.members || [];
    const leader = st.leader ? st.leader.id : "";
    setFact("leader", leader || "none known", leader);
    setFact("term", fmtNum(st.raft.term), st.raft.term);
    setFact("commit", fmtNum(st.raft.commit_index), st.raft.commit_index);
    setFact("applied", fmtNum(st.raft.applied_index), st.raft.applied_index);
    $("raft-state").textContent = st.state + (st.raft.fault ? " — fault: " + st.raft.fault : "");
    const rep = (st.extra && st.extra.repair) || null;
    if (rep) {
      pushHist(state.repairHist, ov.time, rep.pending);
      const rt = rate(state.repairHist);
      const txt = rep.pending === 0 ? "idle (0 pending" + (rep.unrepairable ? ", " + rep.unrepairable + " unrepairable" : "") + ")" :
        rep.pending + " shards pending" + (rt > 0 ? ", " + rt.toFixed(1) + " shards/s, ETA " + fmtDur(rep.pending / rt) : "") +
        (rep.unrepairable ? ", " + rep.unrepairable + " unrepairable" : "");
      setFact("repair", txt + (rep.active ? "" : " (as seen by a follower)"), rep.pending);
    } else setFact("repair", "not reported", "");
    // Rebalancing runs on the leader, which measures its own rate and ETA.
    const reb = (st.extra && st.extra.rebalance) || null;
    if (!reb) setFact("rebalance", "not reported", "");
    else if (!reb.active) setFact("rebalance", "runs on the leader (see its console)", "");
    else if (!reb.running) setFact("rebalance", "idle (0 pending" + (reb.moved_shards ? ", " + fmtNum(reb.moved_shards) + " shards moved" : "") + ")", reb.pending);
    else setFact("rebalance", fmtNum(reb.pending) + " shards pending, " + reb.rate_shards_per_sec.toFixed(1) + " shards/s" +
      (reb.eta_seconds > 0 ? ", ETA " + fmtDur(reb.eta_seconds) : "") +
      (reb.deferred_blocks ? ", " + fmtNum(reb.deferred_blocks) + " blocks wait for repair" : ""), reb.pending);

    const tb = $("members").tBodies[0]; tb.replaceChildren();
    for (const m of state.members) {
      const tr = el("tr", null, { "data-member": m.id });
      const name = el("th", m.id, { scope: "row" });
      if (m.id === leader) name.append(" ", el("span", "(leader)", { class: "muted" }));
      tr.append(name);
      const sc = el("td", null, { "data-field": "state", "data-value": m.state || "" });
      sc.append(el("span", m.state || "unknown", { class: "state state-" + (m.state || "unknown") }));
      tr.append(sc);
      tr.append(cell(m.zone || "—", m.zone || ""));
      tr.append(cell(fmtBytes(m.capacity), m.capacity, "num"));
      tr.append(cell(m.incarnation === undefined ? "—" : fmtNum(m.incarnation), m.incarnation === undefined ? "" : m.incarnation, "num"));
      tr.append(cell(m.voter ? "yes" : "no", m.voter));
      tr.append(cell(m.http_addr || "—"));
      const act = el("td");
      if (m.state === "draining") {
        act.append(actionButton("Cancel drain", "cancel-drain", m.id, "Make " + m.id + " alive again: it takes new shards and the drain stops."));
      } else if (m.state === "alive") {
        act.append(actionButton("Drain", "drain", m.id, "Drain " + m.id + ": it takes no new shards and every shard it holds is copied to other members."));
      }
      tr.append(act);
      tb.append(tr);
    }

    const db = $("drains").tBodies[0]; db.replaceChildren();
    const drains = st.drains || [];
    if (!drains.length) emptyRow(db, "No drain.", 7);
    for (const d of drains) {
      const h = state.drainHist[d.id] || (state.drainHist[d.id] = []);
      pushHist(h, ov.time, d.shards_left);
      const rt = rate(h);
      const tr = el("tr", null, { "data-drain": d.id });
      tr.append(el("th", d.id, { scope: "row" }));
      tr.append(cell(fmtNum(d.shards_left), d.shards_left, "num"));
      tr.append(cell(fmtNum(d.blocks_left), d.blocks_left, "num"));
      tr.append(cell(d.active ? fmtNum(d.moved_shards) + " shards, " + fmtBytes(d.moved_bytes) : "—", d.moved_shards, "num"));
      tr.append(cell(rt > 0 ? rt.toFixed(1) + " shards/s" : "—"));
      tr.append(cell(d.done ? "0 s" : rt > 0 ? fmtDur(d.shards_left / rt) : "—"));
      const status = d.done ? "done" : d.stalled ? "stalled (" + d.stuck + " stuck)" : "in progress";
      tr.append(cell(status, d.done ? "done" : d.stalled ? "stalled" : "running", "drain-status"));
      db.append(tr);
    }
    updateAdmin();
  }

  function actionButton(label, action, id, text) {
    const b = el("button", label, { type: "button", class: "admin-only", "data-action": action, "data-id": id,
      "aria-label": label + " " + id });
    b.disabled = !state.admin;
    b.addEventListener("click", () => confirmAction(action, id, text));
    return b;
  }

  function renderNodePick() {
    const sel = $("node-pick"); const cur = state.pick || state.self;
    const ids = state.members.map((m) => m.id);
    if (sel.options.length !== ids.length || [...sel.options].some((o, i) => o.value !== ids[i])) {
      sel.replaceChildren(...ids.map((id) => el("option", id + (id === state.self ? " (this node)" : ""), { value: id })));
    }
    sel.value = cur;
  }

  function renderNode(v, err) {
    $("tier-node").textContent = state.pick || state.self;
    const tb = $("tier-table").tBodies[0]; tb.replaceChildren();
    if (err) {
      emptyRow(tb, "Unavailable: " + err, 7);
      for (const id of ["demotions", "promotions", "requests"]) setFact(id, "—", "");
      return;
    }
    for (const t of v.tiers) {
      const tr = el("tr", null, { "data-tier": t.tier });
      tr.append(el("th", t.tier.toUpperCase(), { scope: "row" }));
      const pct = t.capacity_bytes > 0 ? " (" + (100 * t.used_bytes / t.capacity_bytes).toFixed(1) + "%)" : "";
      tr.append(cell(fmtBytes(t.used_bytes) + pct, t.used_bytes, "num"));
      tr.append(cell(t.capacity_bytes > 0 ? fmtBytes(t.capacity_bytes) : "unbounded", t.capacity_bytes, "num"));
      tr.append(cell(fmtNum(t.blocks), t.blocks, "num"));
      tr.append(cell(t.hit_ratio < 0 ? "no reads" : (100 * t.hit_ratio).toFixed(1) + "%", t.hit_ratio, "num"));
      tr.append(cell(fmtNum(t.evictions), t.evictions, "num"));
      tr.append(cell(fmtNum(t.corruptions), t.corruptions, "num"));
      tb.append(tr);
    }
    setFact("demotions", fmtNum(v.demotions), v.demotions);
    setFact("promotions", fmtNum(v.promotions), v.promotions);
    setFact("requests", fmtNum(v.requests), v.requests);
    $("streams-node").textContent = v.node_id;
    const sb = $("streams").tBodies[0]; sb.replaceChildren();
    if (!v.streams.length) emptyRow(sb, "No KV-event stream on this node.", 8);
    // Ages are against the overview's time (this node's clock).
    const now = state.lastOverview ? state.lastOverview.time / 1000 : Date.now() / 1000;
    for (const s of v.streams) {
      const tr = el("tr", null, { "data-stream": s.namespace + "/" + s.worker });
      const lag = s.lag_seconds === undefined ? cell("no ts", "") : cell(fmtLag(s.lag_seconds), s.lag_seconds, "num");
      lag.dataset.field = "lag";
      const last = cell(s.last_applied ? fmtLag(Math.max(0, now - s.last_applied)) + " ago" : "—", s.last_applied || "", "num");
      last.dataset.field = "last";
      tr.append(el("td", s.namespace), el("td", s.worker), cell(fmtNum(s.gaps), s.gaps, "num"), cell(fmtNum(s.missed_batches), s.missed_batches, "num"),
        cell(fmtNum(s.healed), s.healed, "num"), cell(fmtNum(s.restarts), s.restarts, "num"), lag, last);
      sb.append(tr);
    }
  }

  // Namespace table sort keys: value of a row for each sortable column.
  // A namespace with no traffic has no "traffic" nor "rates" in the JSON.
  const NO_TRAFFIC = { gets: 0, hits: 0, misses: 0, puts: 0, read_bytes: 0, written_bytes: 0 };
  // The scope picks the cluster's sums (when the overview has them) or
  // this node's own counters.
  const clusterScope = () => state.scope === "cluster" && !!(state.lastOverview && state.lastOverview.traffic_members);
  const tr = (n) => Object.assign({}, NO_TRAFFIC, clusterScope() ? n.cluster_traffic : n.traffic);
  const rt = (n) => Object.assign({}, NO_TRAFFIC, clusterScope() ? n.cluster_rates : n.rates);
  const hitRatio = (r) => (r.hits + r.misses > 0 ? r.hits / (r.hits + r.misses) : -1);
  const NS_SORT = {
    name: { label: "name", get: (n) => n.name }, blocks: { label: "blocks", get: (n) => n.blocks },
    bytes: { label: "bytes", get: (n) => n.bytes }, gets: { label: "gets/s", get: (n) => rt(n).gets },
    hit: { label: "hit ratio", get: (n) => hitRatio(rt(n)) }, puts: { label: "puts/s", get: (n) => rt(n).puts },
    read: { label: "bytes read/s", get: (n) => rt(n).read_bytes }, written: { label: "bytes written/s", get: (n) => rt(n).written_bytes },
    pinned: { label: "pinned blocks", get: (n) => n.pinned },
  };
  function sortNamespaces(list) {
    const { key, dir } = state.nsSort, get = NS_SORT[key].get;
    return list.map((n) => [get(n), n]).sort(([x, a], [y, b]) => {
      if (x !== y) return (x < y ? -1 : 1) * dir;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    }).map(([, n]) => n);
  }
  function setSort(key) {
    const s = state.nsSort;
    if (s.key === key) s.dir = -s.dir; else { s.key = key; s.dir = key === "name" ? 1 : -1; }
    for (const b of document.querySelectorAll("#ns-table button.sort")) {
      b.parentElement.setAttribute("aria-sort", b.dataset.sort !== s.key ? "none" : s.dir > 0 ? "ascending" : "descending");
    }
    $("ns-sort-name").textContent = NS_SORT[s.key].label + (s.dir > 0 ? " (ascending)" : "");
    if (state.lastOverview) renderNamespaces(state.lastOverview);
    announce("Namespaces sorted by " + NS_SORT[s.key].label + (s.dir > 0 ? ", ascending." : ", descending."));
  }
  const fmtLag = (s) => (!isFinite(s) ? "—" : s < 10 ? s.toFixed(2) + " s" : fmtDur(s));
  const fmtRate = (v) => (!isFinite(v) ? "—" : v === 0 ? "0" : v < 10 ? v.toFixed(2) : fmtNum(Math.round(v)));
  // rateCell shows a rate; data-value is the rate, data-total the total
  // since the node started (the namespace's counter in /metrics).
  const rateCell = (text, rate, total) => { const td = cell(text, rate, "num"); td.dataset.total = String(total); return td; };

  // fmtQuota names each tier's per-node byte quota ("none" without one).
  function fmtQuota(q) {
    const parts = [];
    for (const [k, label] of [["dram", "DRAM"], ["nvme", "NVMe"], ["s3", "S3"]]) if (q && q[k]) parts.push(label + " " + fmtBytes(q[k]));
    return parts.length ? parts.join(", ") : "none";
  }

  function renderNamespaces(ov) {
    const f = $("ns-filter").value.trim().toLowerCase();
    const all = sortNamespaces(ov.namespaces.filter((n) => !f || n.name.toLowerCase().includes(f)));
    $("ns-count").textContent = all.length + " of " + ov.namespaces.length + " namespaces" + (ov.usage_error ? " — usage unavailable: " + ov.usage_error : "");
    $("ns-window").textContent = ov.traffic_window_ms ? fmtDur(ov.traffic_window_ms / 1000) : "— (measuring)";
    renderScope(ov);
    const tb = $("ns-table").tBodies[0]; tb.replaceChildren();
    for (const n of all.slice(0, 100)) {
      const r = rt(n), t = tr(n), hr = hitRatio(r);
      const row = el("tr", null, { "data-ns": n.name });
      row.append(el("th", n.name, { scope: "row" }), cell(fmtNum(n.blocks), n.blocks, "num"), cell(fmtBytes(n.bytes), n.bytes, "num"),
        rateCell(fmtRate(r.gets), r.gets, t.gets), rateCell(hr < 0 ? "—" : (100 * hr).toFixed(1) + "%", hr, t.hits + "/" + t.misses),
        rateCell(fmtRate(r.puts), r.puts, t.puts), rateCell(fmtBytes(r.read_bytes) + "/s", r.read_bytes, t.read_bytes),
        rateCell(fmtBytes(r.written_bytes) + "/s", r.written_bytes, t.written_bytes),
        cell("(" + n.k + ", " + n.m + ")"), cell(n.ttl_seconds ? fmtDur(n.ttl_seconds) : "none", n.ttl_seconds),
        cell(fmtNum(n.pinned), n.pinned, "num"), cell(n.priority, n.priority, "num"), cell(n.write_mode || "—"), cell(fmtQuota(n.quota)));
      row.cells[4].title = "since start: " + fmtNum(t.hits) + " hits, " + fmtNum(t.misses) + " misses";
      tb.append(row);
    }
    const wb = $("workers").tBodies[0]; wb.replaceChildren();
    if (!ov.workers.length) emptyRow(wb, "No worker has reported KV events.", 5);
    for (const w of ov.workers) {
      const l = w.load || {};
      const load = Object.keys(l).length ? Object.entries(l).map(([k, v]) => k + " " + v).join(", ") : "—";
      const tr = el("tr");
      tr.append(el("td", w.namespace), el("td", w.worker), cell(fmtNum(w.residencies), w.residencies, "num"), el("td", load), el("td", w.stale ? "yes" : "no"));
      wb.append(tr);
    }
  }

  // renderScope says whose traffic the table shows and, for the cluster,
  // which members answered (a member that did not is named, with why).
  function renderScope(ov) {
    const tm = ov.traffic_members, p = $("ns-members");
    $("ns-scope").hidden = !tm;
    $("ns-scope-name").textContent = clusterScope() ? "the cluster's" : "this node's (" + ov.node_id + ")";
    if (!tm || !clusterScope()) { p.textContent = ""; p.dataset.answered = p.dataset.total = p.dataset.missing = ""; return; }
    const missing = tm.members.filter((m) => !m.answered), pending = tm.members.filter((m) => m.answered && !m.window_ms);
    p.dataset.answered = String(tm.answered); p.dataset.total = String(tm.total);
    p.dataset.missing = missing.map((m) => m.id).join(",");
    p.textContent = "Cluster traffic from " + tm.answered + " of " + tm.total + " members" +
      (missing.length ? "; missing: " + missing.map((m) => m.id + " (" + (m.error || m.state) + ")").join(", ") : "") +
      (pending.length ? "; rates of " + pending.map((m) => m.id).join(", ") + " from the next window" : "") + ".";
    p.className = missing.length ? "warn" : "";
  }

  // Charts: small SVG line charts of the sampler's ring.
  const SVGNS = "http://www.w3.org/2000/svg";
  function chart(title, points, fmt) {
    const box = el("figure", null, { class: "chart", role: "img", "aria-label": title + ": " + (points.length ? "last value " + fmt(points[points.length - 1][1]) : "no data") });
    box.append(el("h3", title, { "aria-hidden": "true" }));
    const svg = document.createElementNS(SVGNS, "svg");
    svg.setAttribute("viewBox", "0 0 300 80"); svg.setAttribute("preserveAspectRatio", "none"); svg.setAttribute("aria-hidden", "true");
    if (points.length > 1) {
      const t0 = points[0][0], t1 = points[points.length - 1][0];
      const vmax = Math.max(...points.map((p) => p[1]), 1e-9);
      const xy = points.map(([t, v]) => ((t - t0) / Math.max(t1 - t0, 1) * 300).toFixed(1) + "," + (78 - v / vmax * 74).toFixed(1));
      const pl = document.createElementNS(SVGNS, "polyline");
      pl.setAttribute("points", xy.join(" ")); pl.setAttribute("fill", "none"); pl.setAttribute("stroke", "#0b5cad"); pl.setAttribute("stroke-width", "1.5");
      svg.append(pl);
    }
    box.append(svg);
    box.append(el("figcaption", points.length ? "now " + fmt(points[points.length - 1][1]) : "collecting…", { class: "last" }));
    return box;
  }
  function rates(samples, get) {
    const out = [];
    for (let i = 1; i < samples.length; i++) {
      const dt = (samples[i].t - samples[i - 1].t) / 1000;
      if (dt > 0) out.push([samples[i].t, Math.max(0, (get(samples[i]) - get(samples[i - 1])) / dt)]);
    }
    return out;
  }
  function renderSeries(s, err) {
    const c = $("charts"); c.replaceChildren();
    if (err) { c.append(el("p", "Charts unavailable: " + err)); return; }
    const sm = s.samples;
    const tiers = sm.length ? sm[sm.length - 1].tiers.map((t) => t.tier) : [];
    const tierOf = (x, name) => x.tiers.find((t) => t.tier === name) || {};
    for (const name of tiers) {
      c.append(chart(name.toUpperCase() + " used", sm.map((x) => [x.t, tierOf(x, name).used_bytes || 0]), fmtBytes));
      c.append(chart(name.toUpperCase() + " hit ratio", sm.map((x) => { const t = tierOf(x, name); const r = (t.hits || 0) + (t.misses || 0); return [x.t, r ? t.hits / r : 0]; }), (v) => (100 * v).toFixed(1) + "%"));
      c.append(chart(name.toUpperCase() + " evictions/s", rates(sm, (x) => tierOf(x, name).evictions || 0), (v) => v.toFixed(2)));
    }
    c.append(chart("Requests/s", rates(sm, (x) => x.requests), (v) => v.toFixed(1)));
    c.append(chart("Demotions/s", rates(sm, (x) => x.demotions), (v) => v.toFixed(2)));
    c.append(chart("Promotions/s", rates(sm, (x) => x.promotions), (v) => v.toFixed(2)));
    c.append(chart("Repair pending", sm.map((x) => [x.t, x.repair_pending]), fmtNum));
  }

  async function refresh() {
    try {
      const ov = await api("/ui/api/overview");
      state.lastOverview = ov;
      alert("");
      const first = !state.self;
      renderCluster(ov);
      if (first) refreshSeries();
      renderNodePick();
      renderNamespaces(ov);
      const pick = state.pick || state.self;
      if (pick === ov.node_id) renderNode(ov.node);
      else api("/ui/api/node?id=" + encodeURIComponent(pick)).then((v) => renderNode(v), (e) => renderNode(null, e.message));
      $("updated").textContent = "updated " + new Date(ov.time).toLocaleTimeString();
      document.body.dataset.loaded = "true";
    } catch (e) {
      alert("Cannot reach this node's console: " + e.message);
    }
  }
  async function refreshSeries() {
    const pick = state.pick || state.self;
    if (!pick) return;
    try { renderSeries(await api("/ui/api/series?id=" + encodeURIComponent(pick))); } catch (e) { renderSeries(null, e.message); }
  }

  function updateAdmin() {
    document.querySelectorAll(".admin-only").forEach((b) => {
      if (b.tagName === "BUTTON") b.disabled = !state.admin; else b.hidden = !state.admin;
    });
    $("mode").textContent = state.admin ? "actions unlocked" : "read-only";
    $("logout-btn").hidden = !state.admin;
  }

  async function login(key) {
    state.key = key;
    try {
      await api("/ui/api/session", { method: "POST" });
      state.admin = true; sessionStorage.setItem("ctxtier-admin-key", key);
      announce("Actions unlocked."); alert("");
      loadKeys();
    } catch (e) {
      state.admin = false; state.key = ""; sessionStorage.removeItem("ctxtier-admin-key");
      alert("Admin key refused: " + e.message);
    }
    updateAdmin();
  }

  async function loadKeys() {
    if (!state.admin) return;
    const tb = $("keys").tBodies[0]; tb.replaceChildren();
    try {
      for (const k of await api("/ui/api/keys")) {
        const tr = el("tr", null, { "data-key": k.access_key_id });
        const act = el("td");
        if (state.key.split(":")[0] !== k.access_key_id) act.append(actionButton("Revoke", "revoke-key", k.access_key_id, "Revoke access key " + k.access_key_id + ": every client using it is refused from now on."));
        tr.append(el("th", k.access_key_id, { scope: "row" }), el("td", (k.namespaces || []).join(", ")), el("td", k.description || ""), act);
        tb.append(tr);
      }
    } catch (e) { emptyRow(tb, "Cannot list keys: " + e.message, 4); }
  }

  // confirmAction asks in a modal dialog, then runs the action.
  function confirmAction(action, id, text, pickFrom) {
    const d = $("confirm");
    $("confirm-h").textContent = "Confirm: " + action.replace(/-/g, " ") + (id ? " " + id : "");
    $("confirm-text").textContent = text;
    const row = $("confirm-pick-row"); row.hidden = !pickFrom;
    if (pickFrom) $("confirm-pick").replaceChildren(...pickFrom.map((p) => el("option", p.label, { value: p.value })));
    d.returnValue = "";
    d.onclose = async () => {
      if (d.returnValue !== "ok") { announce("Cancelled."); return; }
      const target = pickFrom ? $("confirm-pick").value : id;
      try {
        const r = await api("/ui/api/actions/" + action, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ id: target }) });
        announce(action + " " + (target || "") + " done" + (r.leader ? ": leader is " + r.leader : "") + ".");
        alert("");
        if (action === "revoke-key") loadKeys();
        refresh();
      } catch (e) { alert(action + " failed: " + e.message); }
    };
    d.showModal();
    $("confirm-no").focus();
  }

  $("login").addEventListener("submit", (ev) => { ev.preventDefault(); login($("key").value.trim()); $("key").value = ""; });
  $("logout-btn").addEventListener("click", () => { state.admin = false; state.key = ""; sessionStorage.removeItem("ctxtier-admin-key"); updateAdmin(); $("keys").tBodies[0].replaceChildren(); announce("Actions locked."); });
  $("node-pick").addEventListener("change", (ev) => { state.pick = ev.target.value; refresh(); refreshSeries(); });
  for (const b of document.querySelectorAll("#ns-table button.sort")) b.addEventListener("click", () => setSort(b.dataset.sort));
  $("ns-filter").addEventListener("input", () => { if (state.lastOverview) renderNamespaces(state.lastOverview); });
  for (const r of document.querySelectorAll('input[name="ns-scope"]')) r.addEventListener("change", () => {
    state.scope = r.value;
    if (state.lastOverview) renderNamespaces(state.lastOverview);
    announce("Namespace traffic of " + (state.scope === "cluster" ? "the cluster." : "this node."));
  });
  $("transfer-btn").addEventListener("click", () => {
    const leader = state.lastOverview && state.lastOverview.cluster.leader ? state.lastOverview.cluster.leader.id : "";
    const picks = [{ value: "", label: "the most up-to-date follower" }].concat(state.members.filter((m) => m.voter && m.id !== leader && m.state === "alive").map((m) => ({ value: m.id, label: m.id })));
    confirmAction("transfer-leadership", "", "Hand leadership over from " + (leader || "the leader") + ". Writes pause for an election.", picks);
  });

  if (state.key) login(state.key);
  refresh(); refreshSeries();
  setInterval(refresh, POLL_MS);
  setInterval(refreshSeries, SERIES_MS);
})();
