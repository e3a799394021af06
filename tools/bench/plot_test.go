package bench

import (
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

func TestSizeTicks(t *testing.T) {
	for n, want := range map[float64]string{8: "8 B", 1024: "1 KiB", 65536: "64 KiB", 16 << 20: "16 MiB", 1 << 30: "1 GiB", 1536: "1.5 KiB"} {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%v) = %q, want %q", n, got, want)
		}
	}
	var labels []string
	for _, tk := range byteTicks(8, 16<<20) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if len(labels) < 4 || len(labels) > 8 || labels[0] != "8 B" || labels[len(labels)-1] != "16 MiB" {
		t.Errorf("byte ticks over 8 B .. 16 MiB labelled %q: want 4-8 labels from 8 B to 16 MiB", labels)
	}
	var dec []string
	for _, tk := range decadeTicks(0.3, 40) {
		if tk.Label != "" {
			dec = append(dec, tk.Label)
		}
	}
	if len(dec) < 3 {
		t.Errorf("decade ticks over 0.3 .. 40 labelled %q: want at least 3", dec)
	}
}

// A plot rendered as PNG is not blank: it has ink, and every series' colour is on it.
func TestPlotPNGNotBlank(t *testing.T) {
	one := 1
	rows := []collRow{
		{Test: "allreduce", PEs: 2, SizeBytes: 8, LatencyUS: 0.7, LatencyMinUS: 0.6, LatencyMaxUS: 0.9, BusBWGBps: 0.01},
		{Test: "allreduce", PEs: 2, SizeBytes: 65536, LatencyUS: 16, LatencyMinUS: 12, LatencyMaxUS: 30, BusBWGBps: 8.1, SMs: &one},
		{Test: "allreduce", PEs: 2, SizeBytes: 16 << 20, LatencyUS: 2000, LatencyMinUS: 1900, LatencyMaxUS: 2600, BusBWGBps: 8.4},
	}
	mpi := []collRow{{Test: "allreduce", PEs: 2, SizeBytes: 8, LatencyUS: 0.3, BusBWGBps: 0.03}, {Test: "allreduce", PEs: 2, SizeBytes: 65536, LatencyUS: 48, BusBWGBps: 2.7}}
	file := filepath.Join(t.TempDir(), "coll.png")
	if err := plotColl(file, plotCaption(""), rows, []string{"mpi"}, map[string][]collRow{"mpi": mpi}); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, file, 2)
}

// checkPNG fails t unless file is a PNG of a readable size with ink on it and the first series
// colours of plotColors among its pixels.
func checkPNG(t *testing.T, file string, series int) {
	t.Helper()
	img := readPNG(t, file)
	b := img.Bounds()
	if b.Dx() < 600 || b.Dy() < 600 {
		t.Fatalf("PNG is %dx%d: too small to read", b.Dx(), b.Dy())
	}
	ink, found := 0, make([]bool, series)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				ink++
			}
			for i := range found {
				cr, cg, cb, _ := plotColors[i].RGBA()
				if r>>8 == cr>>8 && g>>8 == cg>>8 && bl>>8 == cb>>8 {
					found[i] = true
				}
			}
		}
	}
	if frac := float64(ink) / float64(b.Dx()*b.Dy()); frac < 0.01 {
		t.Errorf("PNG has ink on %.3f%% of its pixels: blank", 100*frac)
	}
	for i, ok := range found {
		if !ok {
			t.Errorf("PNG lacks series %d's colour", i)
		}
	}
}

// On a GPU the plot draws the limits measured in the same job (launch_empty under the latencies,
// copy_d2d over the bus bandwidths) as a series of their own; without those rows there is none.
func TestPlotLimits(t *testing.T) {
	rows := []collRow{
		{Test: "allreduce", PEs: 2, SizeBytes: 8, LatencyUS: 6.8, BusBWGBps: 0.001},
		{Test: "allreduce", PEs: 2, SizeBytes: 16 << 20, LatencyUS: 66, BusBWGBps: 253},
	}
	limits := append([]collRow{{Test: "launch_empty", PEs: 2, LatencyUS: 5.2}, {Test: "copy_d2d", PEs: 2, SizeBytes: 16 << 20, LatencyUS: 17.6, BusBWGBps: 950}}, rows...)
	for _, c := range []struct {
		rows []collRow
		want bool
	}{{limits, true}, {rows, false}} {
		file := filepath.Join(t.TempDir(), "coll.png")
		if err := plotColl(file, "caption", c.rows, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := hasColor(t, file, plotColors[1]); got != c.want {
			t.Errorf("with %d rows: the limit series' colour drawn: %v, want %v", len(c.rows), got, c.want)
		}
	}
}

func readPNG(t *testing.T, file string) image.Image {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", file, err)
	}
	return img
}

func hasColor(t *testing.T, file string, c color.Color) bool {
	t.Helper()
	img := readPNG(t, file)
	cr, cg, cb, _ := c.RGBA()
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 == cr>>8 && g>>8 == cg>>8 && bl>>8 == cb>>8 {
				return true
			}
		}
	}
	return false
}
