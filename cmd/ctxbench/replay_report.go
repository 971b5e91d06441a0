package main

// The replay's HTML report: TTFT CDFs and hit ratios as inline SVG, and the
// comparison table.

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/ctxtier/ctxtier/ctxstore/block"
	"github.com/ctxtier/ctxtier/sim/replay"
)

var replayColors = []string{"#7f7f7f", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"}

func replayHTML(out *replayOutput) string {
	rep := out.Report
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>ctxbench replay</title>
<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f2f2f2}td:first-child{text-align:left}
.note{color:#555;font-size:13px;max-width:900px}</style></head><body>`)
	fmt.Fprintf(&b, "<h1>Trace replay: %s</h1>\n", html.EscapeString(out.Trace))
	c := rep.Config
	fmt.Fprintf(&b, `<p class="note">%d requests over %.0f s of trace; %d prefill and %d decode workers; prefill %.0f tokens/s per worker (%s); HBM prefix cache %d blocks per worker; %d tokens per block, %s per block (%d B/token); blocks sent at 1/%d of their size, the rest accounted at %.3g B/s. Command: <code>%s</code>. Wall time %.1f s.</p>`,
		rep.Requests, rep.TraceSeconds, c.PrefillWorkers, c.DecodeWorkers, c.Prefill.TokensPerSec, html.EscapeString(prefillModel(c)), c.HBMBlocks,
		c.BlockTokens, block.FormatSize(int64(c.BlockTokens)*c.KVBytesPerToken), c.KVBytesPerToken, c.BytesScale,
		c.TierBytesPerSec, html.EscapeString(out.Command), out.WallSec)
	b.WriteString("<h2>Time to first token</h2>\n")
	b.WriteString(ttftCDFSVG(rep))
	b.WriteString("<h2>Hit ratio</h2>\n")
	b.WriteString(hitRatioSVG(rep))
	b.WriteString("<h2>Numbers</h2>\n<table><tr><th>policy</th><th>block hit</th><th>token hit</th><th>HBM hits</th><th>tier hits</th><th>TTFT mean</th><th>p50</th><th>p90</th><th>p99</th><th>TTFT vs no cache (mean)</th><th>E2E p50</th><th>fetched</th><th>put</th></tr>\n")
	for _, p := range rep.Policies {
		red := "-"
		if p.TTFTReduction != nil {
			red = fmt.Sprintf("%+.1f%%", -100*p.TTFTReduction.Mean)
		}
		fmt.Fprintf(&b, "<tr><td>%s</td><td>%.2f%%</td><td>%.2f%%</td><td>%d</td><td>%d</td><td>%.3f s</td><td>%.3f s</td><td>%.3f s</td><td>%.3f s</td><td>%s</td><td>%.3f s</td><td>%s</td><td>%s</td></tr>\n",
			p.Policy, 100*p.BlockHitRatio, 100*p.TokenHitRatio, p.HBMHitBlocks, p.TierHitBlocks, p.TTFT.Mean, p.TTFT.P50, p.TTFT.P90, p.TTFT.P99,
			red, p.E2E.P50, block.FormatSize(p.FetchBytes), block.FormatSize(p.PutBytes))
	}
	fmt.Fprintf(&b, "<tr><td>infinite cache (bound)</td><td>%.2f%%</td><td>%.2f%%</td><td colspan=11></td></tr></table>\n",
		100*rep.InfiniteBlockHitRatio, 100*rep.InfiniteTokenHitRatio)
	b.WriteString(`<p class="note">TTFT = simulated queueing + measured routing, tier lookup, fetch and put calls against ctxd + modelled prefill of the tokens not found cached + modelled transfer of the block bytes a scaled run does not send. Hits count blocks found in the worker's HBM or fetched from ctxtier, with prefix semantics. The bound is a cache that never evicts and sees each block as soon as its request arrives.</p>`)
	b.WriteString("</body></html>\n")
	return b.String()
}

const (
	svgW, svgH                     = 760, 420
	padL, padR, padT, padB float64 = 70, 190, 20, 50
)

// ttftCDFSVG plots each policy's TTFT CDF on a log time axis.
func ttftCDFSVG(rep *replay.Report) string {
	lo, hi := math.Inf(1), 0.0
	for _, p := range rep.Policies {
		for _, pt := range p.TTFTCDF {
			if pt[0] > 0 {
				lo = min(lo, pt[0])
			}
			hi = max(hi, pt[0])
		}
	}
	if math.IsInf(lo, 1) || hi <= 0 {
		return "<p>no data</p>"
	}
	d0, d1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if d1 <= d0 {
		d1 = d0 + 1
	}
	pw, ph := svgW-padL-padR, svgH-padT-padB
	x := func(v float64) float64 {
		v = max(v, math.Pow(10, d0))
		return padL + (math.Log10(v)-d0)/(d1-d0)*pw
	}
	y := func(f float64) float64 { return padT + (1-f)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, svgW, svgH)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	mults := []float64{1, 2, 5}
	if d1-d0 > 3 {
		mults = []float64{1} // many decades: label decades only
	}
	for d := d0; d <= d1; d++ {
		for _, m := range mults {
			v := m * math.Pow(10, d)
			if d == d1 && m > 1 {
				break
			}
			xx := x(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="%s"/>`, xx, padT, xx, padT+ph, stroke)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, xx, padT+ph+16, secondsLabel(v))
		}
	}
	for f := 0.0; f <= 1.0001; f += 0.25 {
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, padL, y(f), padL+pw, y(f))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.2f</text>`, padL-6, y(f)+4, f)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">time to first token (log scale)</text>`, padL+pw/2, svgH-8)
	fmt.Fprintf(&b, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">fraction of requests</text>`, padT+ph/2, padT+ph/2)
	for i, p := range rep.Policies {
		col := replayColors[i%len(replayColors)]
		var pts []string
		prevF := 0.0
		for _, pt := range p.TTFTCDF {
			// A step: right at the previous fraction, then up.
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(prevF)), fmt.Sprintf("%.1f,%.1f", x(pt[0]), y(pt[1])))
			prevF = pt[1]
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, col, strings.Join(pts, " "))
		ly := padT + 16 + float64(i)*20
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="3"/>`, padL+pw+12, ly-4, padL+pw+36, ly-4, col)
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">%s</text>`, padL+pw+42, ly, html.EscapeString(string(p.Policy)))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func secondsLabel(v float64) string {
	switch {
	case v >= 1:
		return trimFloat(v) + "s"
	case v >= 1e-3:
		return trimFloat(v*1e3) + "ms"
	default:
		return trimFloat(v*1e6) + "µs"
	}
}

// hitRatioSVG draws each policy's block hit ratio as a bar split into HBM
// and tier hits, with the infinite-cache bound as a dashed line.
func hitRatioSVG(rep *replay.Report) string {
	n := len(rep.Policies)
	pw, ph := svgW-padL-padR, svgH-padT-padB
	top := 1.0
	if m := max(rep.InfiniteBlockHitRatio, 0.05); m < 0.5 {
		top = math.Ceil(m*1.2*10) / 10
	}
	y := func(f float64) float64 { return padT + (1-f/top)*ph }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`, svgW, svgH)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	for k := 0; k <= 5; k++ {
		f := top * float64(k) / 5
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`, padL, y(f), padL+pw, y(f))
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%.0f%%</text>`, padL-6, y(f)+4, 100*f)
	}
	fmt.Fprintf(&b, `<text x="16" y="%.0f" transform="rotate(-90 16 %.0f)" text-anchor="middle">block hit ratio</text>`, padT+ph/2, padT+ph/2)
	slot := pw / float64(max(n, 1))
	for i, p := range rep.Policies {
		bx := padL + float64(i)*slot + slot*0.2
		bw := slot * 0.6
		hbm, tier := 0.0, 0.0
		if p.Blocks > 0 {
			hbm, tier = float64(p.HBMHitBlocks)/float64(p.Blocks), float64(p.TierHitBlocks)/float64(p.Blocks)
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f77b4"/>`, bx, y(hbm), bw, y(0)-y(hbm))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2ca02c"/>`, bx, y(hbm+tier), bw, y(hbm)-y(hbm+tier))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%.1f%%</text>`, bx+bw/2, y(hbm+tier)-5, 100*(hbm+tier))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`, bx+bw/2, padT+ph+16, html.EscapeString(string(p.Policy)))
	}
	by := y(rep.InfiniteBlockHitRatio)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="6,4"/>`, padL, by, padL+pw, by)
	lx := padL + pw + 12
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#d62728" stroke-width="2" stroke-dasharray="6,4"/><text x="%.0f" y="%.1f">infinite cache %.1f%%</text>`,
		lx, padT+12, lx+24, padT+12, lx+30, padT+16, 100*rep.InfiniteBlockHitRatio)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="24" height="10" fill="#1f77b4"/><text x="%.0f" y="%.0f">HBM hits</text>`, lx, padT+30, lx+30, padT+39)
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="24" height="10" fill="#2ca02c"/><text x="%.0f" y="%.0f">ctxtier hits</text>`, lx, padT+48, lx+30, padT+57)
	b.WriteString("</svg>\n")
	return b.String()
}
