package bench

// The benchmarks' one plotting code (--coll's collectives, --rails's rails): panels of log-log
// axes with sizes in B/KiB/MiB, readable ticks, spread bars, one legend above the panels (a
// series keeps its colour across panels), and a caption with the command, machine, date and
// load. The file's extension picks SVG (.svg) or PNG (.png).

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// plotPanel is one log-log panel of plotGrid's grid. XBytes labels the x axis's ticks as sizes.
type plotPanel struct {
	Title, XLabel, YLabel string
	XBytes                bool
	Series                []plotSeries
}

// plotSeries is one line of a panel; Color indexes plotColors, so that one series keeps its
// colour across panels.
type plotSeries struct {
	Name  string
	Color int
	Pts   []plotPoint // points at or below zero are left out (log axes)
}

// plotPoint is one figure and its spread over rounds (Lo, Hi; zero when there is none).
type plotPoint struct{ X, Y, Lo, Hi float64 }

var plotColors = []color.Color{color.RGBA{0xd6, 0x27, 0x28, 255}, color.RGBA{0x1f, 0x77, 0xb4, 255}, color.RGBA{0x2c, 0xa0, 0x2c, 255}, color.RGBA{0xff, 0x7f, 0x0e, 255}, color.RGBA{0x94, 0x67, 0xbd, 255}}

// plotCaption says where a plot's figures come from: the command, the machine, the date and the
// machine's load (the benchmark's own record of it when it has one, else now).
func plotCaption(load string) string {
	if load == "" {
		load = loadAvg()
	}
	host, _ := os.Hostname()
	args := append([]string{filepath.Base(os.Args[0])}, os.Args[1:]...)
	return fmt.Sprintf("%s | %s, %d CPUs (%s) | %s | load average %s",
		strings.Join(args, " "), host, runtime.NumCPU(), cpuModel(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), load)
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return runtime.GOARCH
}

// sizeLabel writes a byte count as people read it: 8 B, 4 KiB, 16 MiB.
func sizeLabel(n float64) string {
	for _, u := range []struct {
		s string
		v float64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.v {
			return trimFloat(n/u.v) + " " + u.s
		}
	}
	return trimFloat(n) + " B"
}

// trimFloat writes a tick's value plainly: 1000, not 1e+03.
func trimFloat(v float64) string {
	if v >= 1 && v < 1e7 && v == math.Round(v) {
		return fmt.Sprintf("%d", int64(v))
	}
	return strings.TrimSuffix(fmt.Sprintf("%.3g", v), ".0")
}

// byteTicks marks powers of two, labelling at most eight of them evenly.
func byteTicks(lo, hi float64) []plot.Tick {
	e0, e1 := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	step := max(1, (e1-e0+6)/7)
	var ts []plot.Tick
	for e := e0; e <= e1; e++ {
		v := math.Exp2(float64(e))
		if v < lo*0.999 || v > hi*1.001 {
			continue
		}
		t := plot.Tick{Value: v}
		if (e-e0)%step == 0 {
			t.Label = sizeLabel(v)
		}
		ts = append(ts, t)
	}
	return ts
}

// decadeTicks labels powers of ten, and 2 and 5 times them where that gives under three
// labels, with minor ticks at the other multiples.
func decadeTicks(lo, hi float64) []plot.Tick {
	d0, d1 := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	mark := func(fine bool) (ts []plot.Tick, labels int) {
		for d := d0; d <= d1; d++ {
			for m := 1; m <= 9; m++ {
				v := float64(m) * math.Pow10(d)
				if v < lo*0.999 || v > hi*1.001 {
					continue
				}
				t := plot.Tick{Value: v}
				if m == 1 || (fine && (m == 2 || m == 5)) {
					t.Label = trimFloat(v)
					labels++
				}
				ts = append(ts, t)
			}
		}
		return ts, labels
	}
	ts, n := mark(false)
	if n < 3 {
		ts, _ = mark(true)
	}
	return ts
}

// spreadPts gives plotter.YErrorBars a series' points with their spread below and above.
type spreadPts []plotPoint

func (s spreadPts) Len() int                        { return len(s) }
func (s spreadPts) XY(i int) (float64, float64)     { return s[i].X, s[i].Y }
func (s spreadPts) YError(i int) (float64, float64) { return s[i].Y - s[i].Lo, s[i].Hi - s[i].Y }

func textStyle(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YCenter}
}

// plotGrid draws panels, rows of them, under a caption line and a legend, into an SVG or PNG file.
func plotGrid(file, caption string, panels [][]plotPanel) error {
	cols := 0
	for _, row := range panels {
		cols = max(cols, len(row))
	}
	var names []string
	colorOf := map[string]color.Color{}
	var grid [][]*plot.Plot
	for _, row := range panels {
		line := make([]*plot.Plot, cols)
		for j, pn := range row {
			p := plot.New()
			p.Title.Text = pn.Title
			p.X.Label.Text, p.Y.Label.Text = pn.XLabel, pn.YLabel
			p.X.Padding, p.Y.Padding = vg.Millimeter*2, vg.Millimeter*2
			p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = 9, 9
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, sr := range pn.Series {
				var pts spreadPts
				for _, pt := range sr.Pts {
					if pt.X <= 0 || pt.Y <= 0 {
						continue
					}
					if pt.Lo <= 0 || pt.Lo > pt.Y {
						pt.Lo = pt.Y
					}
					if pt.Hi < pt.Y {
						pt.Hi = pt.Y
					}
					lo, hi = math.Min(lo, pt.Lo), math.Max(hi, pt.Hi)
					pts = append(pts, pt)
				}
				if len(pts) == 0 {
					continue
				}
				sort.Slice(pts, func(a, b int) bool { return pts[a].X < pts[b].X })
				l, dots, err := plotter.NewLinePoints(pts)
				if err != nil {
					return err
				}
				c := plotColors[sr.Color%len(plotColors)]
				l.Color, dots.Color = c, c
				p.Add(l, dots)
				bars, err := plotter.NewYErrorBars(pts)
				if err != nil {
					return err
				}
				bars.Color = c
				p.Add(bars)
				if _, seen := colorOf[sr.Name]; !seen {
					names = append(names, sr.Name)
					colorOf[sr.Name] = c
				}
			}
			if !math.IsInf(lo, 1) { // log axes need data above zero; an empty panel keeps linear ones
				p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
				p.Y.Tick.Marker = plot.TickerFunc(decadeTicks)
				p.X.Tick.Marker = plot.TickerFunc(decadeTicks)
				if pn.XBytes {
					p.X.Tick.Marker = plot.TickerFunc(byteTicks)
				}
				// A little room above and below the spread, so that no bar sits on the frame.
				p.Y.Min, p.Y.Max = lo/1.25, hi*1.25
			} else {
				p.Title.Text += " (no rows)"
				p.HideAxes()
			}
			line[j] = p
		}
		for j := range line {
			if line[j] == nil {
				line[j] = plot.New() // a short row: blank tiles
			}
		}
		grid = append(grid, line)
	}
	const cellW, cellH = 5.2 * vg.Inch, 3.4 * vg.Inch
	header := 0.75 * vg.Inch
	width, height := vg.Length(max(cols, 1))*cellW, vg.Length(len(grid))*cellH+header
	var svg *vgsvg.Canvas
	var png vgimg.PngCanvas
	switch strings.ToLower(filepath.Ext(file)) {
	case ".svg":
		svg = vgsvg.New(width, height)
	case ".png":
		png = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))}
	default:
		return fmt.Errorf("%s: the plot is written as .svg or .png", file)
	}
	var dc draw.Canvas
	if svg != nil {
		dc = draw.New(svg)
		dc.SetColor(color.White)
		dc.Fill(dc.Rectangle.Path())
	} else {
		dc = draw.New(png)
	}

	// The header: the caption on the first line, the legend on the second.
	top := dc.Max.Y - vg.Millimeter*4
	dc.FillText(textStyle(8), vg.Point{X: dc.Min.X + vg.Millimeter*4, Y: top}, caption)
	x, y := dc.Min.X+vg.Millimeter*4, top-vg.Millimeter*7
	for _, n := range names {
		ls := draw.LineStyle{Color: colorOf[n], Width: vg.Points(2)}
		dc.StrokeLine2(ls, x, y, x+vg.Millimeter*8, y)
		sty := textStyle(10)
		dc.FillText(sty, vg.Point{X: x + vg.Millimeter*10, Y: y}, n)
		x += vg.Millimeter*16 + sty.Width(n)
	}

	body := draw.Crop(dc, 0, 0, 0, -header)
	tiles := draw.Tiles{Rows: len(grid), Cols: max(cols, 1), PadX: vg.Millimeter * 6, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 8}
	canvases := plot.Align(grid, tiles, body)
	for i := range grid {
		for j := range grid[i] {
			grid[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if svg != nil {
		_, err = svg.WriteTo(f)
	} else {
		_, err = png.WriteTo(f)
	}
	if err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
