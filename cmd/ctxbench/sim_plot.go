package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// glyphs is a 3x5 pixel font (rows top to bottom, bit 2 = left column) for
// the labels of the sweep plot; no font dependency is needed for a chart.
var glyphs = map[rune][5]uint8{
	'0': {7, 5, 5, 5, 7}, '1': {2, 6, 2, 2, 7}, '2': {7, 1, 7, 4, 7}, '3': {7, 1, 7, 1, 7}, '4': {5, 5, 7, 1, 1},
	'5': {7, 4, 7, 1, 7}, '6': {7, 4, 7, 5, 7}, '7': {7, 1, 1, 2, 2}, '8': {7, 5, 7, 5, 7}, '9': {7, 5, 7, 1, 7},
	'.': {0, 0, 0, 0, 2}, '%': {5, 1, 2, 4, 5}, '-': {0, 0, 7, 0, 0}, ':': {0, 2, 0, 2, 0}, ' ': {},
	'(': {1, 2, 2, 2, 1}, ')': {4, 2, 2, 2, 4}, '/': {1, 1, 2, 4, 4}, '_': {0, 0, 0, 0, 7}, ',': {0, 0, 0, 2, 4},
	'a': {2, 5, 7, 5, 5}, 'b': {6, 5, 6, 5, 6}, 'c': {3, 4, 4, 4, 3}, 'd': {6, 5, 5, 5, 6}, 'e': {7, 4, 6, 4, 7},
	'f': {7, 4, 6, 4, 4}, 'g': {3, 4, 5, 5, 3}, 'h': {5, 5, 7, 5, 5}, 'i': {7, 2, 2, 2, 7}, 'j': {1, 1, 1, 5, 2},
	'k': {5, 5, 6, 5, 5}, 'l': {4, 4, 4, 4, 7}, 'm': {5, 7, 7, 5, 5}, 'n': {6, 5, 5, 5, 5}, 'o': {2, 5, 5, 5, 2},
	'p': {6, 5, 6, 4, 4}, 'q': {2, 5, 5, 6, 3}, 'r': {6, 5, 6, 5, 5}, 's': {3, 4, 2, 1, 6}, 't': {7, 2, 2, 2, 2},
	'u': {5, 5, 5, 5, 7}, 'v': {5, 5, 5, 5, 2}, 'w': {5, 5, 7, 7, 5}, 'x': {5, 5, 2, 5, 5}, 'y': {5, 5, 2, 2, 2},
	'z': {7, 1, 2, 4, 7},
}

type canvas struct{ *image.RGBA }

func (c canvas) dot(x, y, r int, col color.Color) {
	for dy := -r; dy <= r; dy++ {
		for dx := -r; dx <= r; dx++ {
			c.Set(x+dx, y+dy, col)
		}
	}
}

func (c canvas) line(x0, y0, x1, y1, r int, col color.Color) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		c.dot(x0+(x1-x0)*i/n, y0+(y1-y0)*i/n, r, col)
	}
}

// text draws s with its top-left corner at (x, y), scale pixels per dot.
func (c canvas) text(x, y, scale int, s string, col color.Color) {
	for _, ch := range strings.ToLower(s) {
		g, ok := glyphs[ch]
		if !ok {
			g = glyphs['_']
		}
		for row := range 5 {
			for bit := range 3 {
				if g[row]>>(2-bit)&1 == 1 {
					for dy := range scale {
						for dx := range scale {
							c.Set(x+bit*scale+dx, y+row*scale+dy, col)
						}
					}
				}
			}
		}
		x += 4 * scale
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// plotSeries is one curve of a linePlot: points (xs[i], ys[i]) in order.
type plotSeries struct {
	name   string
	col    color.RGBA
	xs, ys []float64
}

// linePlot is a chart of curves over one x axis: linear from 0 with nice
// steps, or logarithmic (logX) with a tick at each of xTicks. The y axis runs
// from 0 to yMax (0: the largest y, rounded up to a nice step) with a label
// of yFmt (nil: the value) every yStep (0: a nice step).
type linePlot struct {
	title, xLabel string
	logX          bool
	xTicks        []float64
	yMax, yStep   float64
	yFmt          func(float64) string
	series        []plotSeries
}

// palette colours the curves of a plot in turn.
var palette = []color.RGBA{{20, 90, 220, 255}, {220, 40, 40, 255}, {30, 160, 60, 255}, {230, 140, 0, 255}, {140, 60, 200, 255}, {0, 160, 170, 255}, {120, 120, 120, 255}}

// writePNG draws the plot into a PNG file at path: 960 pixels wide, 600
// high plus a legend row per curve below the axes.
func (lp linePlot) writePNG(path string) error {
	const w, left, right, top = 960, 90, 40, 60
	bottom := 80 + 22*len(lp.series) + 10
	h := 520 + bottom
	img := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	white, black, grid := color.RGBA{255, 255, 255, 255}, color.RGBA{0, 0, 0, 255}, color.RGBA{225, 225, 225, 255}
	for y := range h {
		for x := range w {
			img.Set(x, y, white)
		}
	}
	minX, maxX, maxY := math.Inf(1), 0.0, 0.0
	for _, sr := range lp.series {
		for i := range sr.xs {
			minX, maxX = math.Min(minX, sr.xs[i]), math.Max(maxX, sr.xs[i])
			if !math.IsNaN(sr.ys[i]) && !math.IsInf(sr.ys[i], 0) {
				maxY = math.Max(maxY, sr.ys[i])
			}
		}
	}
	yStep, yMax := lp.yStep, lp.yMax
	if yStep <= 0 {
		yStep = niceStep(math.Max(yMax, maxY) / 6)
	}
	if yMax <= 0 {
		yMax = math.Max(math.Ceil(maxY/yStep)*yStep, yStep)
	}
	yFmt := lp.yFmt
	if yFmt == nil {
		yFmt = trimFloat
	}
	var px func(float64) int
	xTicks := lp.xTicks
	if lp.logX {
		if len(xTicks) > 0 {
			minX, maxX = math.Min(minX, slices.Min(xTicks)), math.Max(maxX, slices.Max(xTicks))
		}
		lo, hi := math.Log10(minX), math.Log10(maxX)
		if hi <= lo {
			hi = lo + 1
		}
		px = func(v float64) int { return left + 20 + int((math.Log10(v)-lo)/(hi-lo)*float64(w-left-right-40)) }
	} else {
		step := niceStep(maxX / 6)
		maxX = math.Max(math.Ceil(maxX/step)*step, step)
		xTicks = nil
		for m := 0.0; m <= maxX+1e-9; m += step {
			xTicks = append(xTicks, m)
		}
		px = func(v float64) int { return left + int(v/maxX*float64(w-left-right)) }
	}
	py := func(v float64) int { return h - bottom - int(math.Min(v, yMax)/yMax*float64(h-top-bottom)) }
	for v := 0.0; v <= yMax+yStep/1e6; v += yStep {
		img.line(left, py(v), w-right, py(v), 0, grid)
		label := yFmt(v)
		img.text(left-8-8*len(label), py(v)-5, 2, label, black)
	}
	for _, v := range xTicks {
		img.line(px(v), top, px(v), h-bottom, 0, grid)
		label := trimFloat(v)
		img.text(px(v)-4*len(label), h-bottom+12, 2, label, black)
	}
	img.line(left, h-bottom, w-right, h-bottom, 1, black)
	img.line(left, top, left, h-bottom, 1, black)
	img.text(left+(w-left-right)/2-4*len(lp.xLabel), h-bottom+44, 2, lp.xLabel, black)
	img.text(left, 14, 2, lp.title, black)
	for i, sr := range lp.series {
		var lx, ly int
		drawn := false
		for j := range sr.xs {
			if math.IsNaN(sr.ys[j]) || math.IsInf(sr.ys[j], 0) {
				drawn = false
				continue
			}
			x, y := px(sr.xs[j]), py(sr.ys[j])
			if drawn {
				img.line(lx, ly, x, y, 1, sr.col)
			}
			img.dot(x, y, 3, sr.col)
			lx, ly, drawn = x, y, true
		}
		ly0 := h - bottom + 80 + 22*i
		img.line(left+20, ly0+5, left+50, ly0+5, 2, sr.col)
		img.text(left+60, ly0, 2, sr.name, black)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeSweepPNG plots each policy's hit ratio, as a percentage of the
// infinite-cache bound, against capacity in millions of tokens.
func writeSweepPNG(path, tracePath, policyName string, rows []simRow) error {
	lp := linePlot{
		title:  "hit ratio as % of the infinite-cache bound: " + filepath.Base(tracePath),
		xLabel: "capacity (million tokens)",
		yMax:   100, yStep: 10,
		yFmt: func(v float64) string { return fmt.Sprintf("%3.0f%%", v) },
	}
	add := func(name string, col color.RGBA, get func(simRow) float64) {
		sr := plotSeries{name: name, col: col}
		for _, r := range rows {
			sr.xs = append(sr.xs, float64(r.tokens)/1e6)
			sr.ys = append(sr.ys, 100*get(r))
		}
		lp.series = append(lp.series, sr)
	}
	add(policyName, palette[0], func(r simRow) float64 { return frac(r.policy, r.bound) })
	add("lru", palette[1], func(r simRow) float64 { return frac(r.lru, r.bound) })
	add("belady (offline optimum)", palette[2], func(r simRow) float64 { return frac(r.belady, r.bound) })
	for i := range rows[0].compare {
		add(rows[0].compare[i].Policy, palette[3+i%(len(palette)-3)], func(r simRow) float64 { return frac(r.compare[i], r.bound) })
	}
	return lp.writePNG(path)
}

func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
