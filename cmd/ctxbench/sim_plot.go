package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
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

// writeSweepPNG plots each policy's hit ratio, as a percentage of the
// infinite-cache bound, against capacity in millions of tokens.
func writeSweepPNG(path, tracePath, policyName string, rows []simRow) error {
	const w, h, left, right, top, bottom = 960, 600, 90, 40, 60, 80
	img := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	white, black, grid := color.RGBA{255, 255, 255, 255}, color.RGBA{0, 0, 0, 255}, color.RGBA{225, 225, 225, 255}
	for y := range h {
		for x := range w {
			img.Set(x, y, white)
		}
	}
	maxTok := 0.0
	for _, r := range rows {
		maxTok = math.Max(maxTok, float64(r.tokens)/1e6)
	}
	step := niceStep(maxTok / 6)
	maxX := math.Ceil(maxTok/step) * step
	px := func(m float64) int { return left + int(m/maxX*float64(w-left-right)) }
	py := func(pct float64) int { return h - bottom - int(pct/100*float64(h-top-bottom)) }
	for pct := 0.0; pct <= 100; pct += 10 {
		img.line(left, py(pct), w-right, py(pct), 0, grid)
		img.text(left-40, py(pct)-5, 2, fmt.Sprintf("%3.0f%%", pct), black)
	}
	for m := 0.0; m <= maxX+1e-9; m += step {
		img.line(px(m), top, px(m), h-bottom, 0, grid)
		img.text(px(m)-10, h-bottom+12, 2, trimFloat(m), black)
	}
	img.line(left, h-bottom, w-right, h-bottom, 1, black)
	img.line(left, top, left, h-bottom, 1, black)
	img.text(left+(w-left-right)/2-120, h-bottom+44, 2, "capacity (million tokens)", black)
	img.text(left, 14, 2, "hit ratio as % of the infinite-cache bound: "+filepath.Base(tracePath), black)
	series := []struct {
		name string
		col  color.RGBA
		get  func(simRow) float64
	}{
		{policyName, color.RGBA{20, 90, 220, 255}, func(r simRow) float64 { return frac(r.policy, r.bound) }},
		{"lru", color.RGBA{220, 40, 40, 255}, func(r simRow) float64 { return frac(r.lru, r.bound) }},
		{"belady (offline optimum)", color.RGBA{30, 160, 60, 255}, func(r simRow) float64 { return frac(r.belady, r.bound) }},
	}
	palette := []color.RGBA{{230, 140, 0, 255}, {140, 60, 200, 255}, {0, 160, 170, 255}, {120, 120, 120, 255}}
	for i := range rows[0].compare {
		series = append(series, struct {
			name string
			col  color.RGBA
			get  func(simRow) float64
		}{rows[0].compare[i].Policy, palette[i%len(palette)], func(r simRow) float64 { return frac(r.compare[i], r.bound) }})
	}
	for i, s := range series {
		var lx, ly int
		for j, r := range rows {
			x, y := px(float64(r.tokens)/1e6), py(100*s.get(r))
			if j > 0 {
				img.line(lx, ly, x, y, 1, s.col)
			}
			img.dot(x, y, 3, s.col)
			lx, ly = x, y
		}
		ly0 := h - bottom - 22*len(series) + 22*i
		img.line(w-right-300, ly0+5, w-right-270, ly0+5, 2, s.col)
		img.text(w-right-260, ly0, 2, s.name, black)
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
