package console

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ctxtier/ctxtier/ctxstore"
	"github.com/ctxtier/ctxtier/gateway/clusterapi"
)

// MemberTraffic fetches another member's per-namespace traffic counters
// (its GET /v1/cluster/internal/traffic, with the cluster secret). cmd/ctxd
// implements it over ctxstore/cluster/control's Client.
type MemberTraffic interface {
	Traffic(ctx context.Context, m clusterapi.Member) ([]ctxstore.TrafficCount, error)
}

// MemberAnswer says whether one member's counters are in the cluster's
// traffic of this overview.
type MemberAnswer struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Answered: the member's counters are summed in.
	Answered bool `json:"answered"`
	// Error says why not: the request failed or timed out, or the member
	// was not asked (dead, or no HTTP address).
	Error string `json:"error,omitempty"`
	// WindowMS is the window of the member's rates (0: its first reading,
	// so its rates are not in the cluster's rates yet; its totals are).
	WindowMS int64 `json:"window_ms"`
}

// ClusterTraffic says whose counters the namespaces' cluster_traffic and
// cluster_rates sum.
type ClusterTraffic struct {
	// Answered counts the members summed in, of Total (every member but
	// those that left the cluster).
	Answered int `json:"answered"`
	Total    int `json:"total"`
	// Members are those members, sorted by id.
	Members []MemberAnswer `json:"members"`
}

// memberReading is one member's reply in one overview build.
type memberReading struct {
	member clusterapi.Member
	answer MemberAnswer
	totals map[string]Traffic
}

// clusterTraffic asks every other member of st for its traffic counters,
// in parallel, each request bounded by Config.MemberTimeout, and sums
// what came back with this node's own totals and rates (local, localRates
// over localWindow). Only namespaces in known are kept: memory stays
// bounded by the namespaces that exist times the members. It returns the
// cluster's totals and rates per namespace. Only the overview's builder
// calls it (it owns c.members).
func (c *Console) clusterTraffic(ctx context.Context, now time.Time, st clusterapi.Status, known map[string]bool,
	local, localRates map[string]Traffic, localWindow time.Duration) (ClusterTraffic, map[string]Traffic, map[string]Traffic) {
	readings := make([]memberReading, 0, len(st.Members)+1)
	self := false
	for _, m := range st.Members {
		if m.State == "left" {
			continue
		}
		r := memberReading{member: m, answer: MemberAnswer{ID: m.ID, State: m.State}}
		switch {
		case m.ID == c.deps.NodeID:
			self = true
			r.answer.Answered, r.answer.WindowMS, r.totals = true, localWindow.Milliseconds(), local
		case m.State == "dead":
			r.answer.Error = "not asked: dead"
		case m.HTTPAddr == "":
			r.answer.Error = "not asked: no HTTP address"
		}
		readings = append(readings, r)
	}
	if !self {
		readings = append(readings, memberReading{answer: MemberAnswer{ID: c.deps.NodeID, State: "self", Answered: true,
			WindowMS: localWindow.Milliseconds()}, totals: local})
	}
	var wg sync.WaitGroup
	for i := range readings {
		r := &readings[i]
		if r.answer.Answered || r.answer.Error != "" {
			continue
		}
		wg.Go(func() {
			mctx, cancel := context.WithTimeout(ctx, c.cfg.MemberTimeout)
			defer cancel()
			counts, err := c.deps.Members.Traffic(mctx, r.member)
			if err != nil {
				r.answer.Error = err.Error()
				return
			}
			r.totals = make(map[string]Traffic, min(len(counts), len(known)))
			for _, tc := range counts {
				if known[tc.Namespace] {
					r.totals[tc.Namespace] = trafficOfCount(tc)
				}
			}
			r.answer.Answered = true
		})
	}
	wg.Wait()

	ct := ClusterTraffic{Total: len(readings), Members: make([]MemberAnswer, 0, len(readings))}
	totals := make(map[string]Traffic, len(local))
	rts := make(map[string]Traffic, len(localRates))
	seen := make(map[string]bool, len(readings))
	for i := range readings {
		r := &readings[i]
		seen[r.answer.ID] = true
		if !r.answer.Answered {
			ct.Members = append(ct.Members, r.answer)
			continue
		}
		ct.Answered++
		rt := localRates
		if r.answer.ID != c.deps.NodeID {
			mr := c.members[r.answer.ID]
			if mr == nil {
				mr = &rates{window: c.cfg.TrafficWindow}
				c.members[r.answer.ID] = mr
			}
			var w time.Duration
			rt, w = mr.observe(now, r.totals)
			r.answer.WindowMS = w.Milliseconds()
		}
		for ns, t := range r.totals {
			if known[ns] {
				totals[ns] = totals[ns].plus(t)
			}
		}
		for ns, t := range rt {
			if known[ns] {
				rts[ns] = rts[ns].plus(t)
			}
		}
		ct.Members = append(ct.Members, r.answer)
	}
	// A member that left (or was removed) takes its readings with it.
	for id := range c.members {
		if !seen[id] {
			delete(c.members, id)
		}
	}
	slices.SortFunc(ct.Members, func(a, b MemberAnswer) int { return strings.Compare(a.ID, b.ID) })
	return ct, totals, rts
}

func trafficOfCount(c ctxstore.TrafficCount) Traffic {
	return Traffic{Gets: float64(c.Gets), Hits: float64(c.Hits), Misses: float64(c.Misses),
		Puts: float64(c.Puts), ReadBytes: float64(c.ReadBytes), WrittenBytes: float64(c.WrittenBytes)}
}

func (t Traffic) plus(o Traffic) Traffic {
	return Traffic{Gets: t.Gets + o.Gets, Hits: t.Hits + o.Hits, Misses: t.Misses + o.Misses, Puts: t.Puts + o.Puts,
		ReadBytes: t.ReadBytes + o.ReadBytes, WrittenBytes: t.WrittenBytes + o.WrittenBytes}
}
