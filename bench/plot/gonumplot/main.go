// Command gonumplot draws bench/plot/attn_speedup.py's figure with
// gonum/plot, for machines without matplotlib: decode-attention speedup
// over PyTorch SDPA fp16, batch 1 against context (left) and every grid
// point as grouped bars (right), from 'bitdecode bench attn --device cuda
// --anchor sdpa.json --json gpu_attn.json'.
//
//	cd bench/plot/gonumplot && go run . ../../results/DIR/gpu_attn.json out.png
//
// It is its own module so that the engine's build never needs gonum.
package main

import (
	"encoding/json"
	"fmt"
	"image/color"
	"log"
	"os"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

type row struct {
	Format  string  `json:"format"`
	B       int     `json:"B"`
	L       int     `json:"L"`
	Speedup float64 `json:"speedup_vs_sdpa"`
}

type report struct {
	Date   string `json:"date"`
	Device string `json:"device"`
	Rows   []row  `json:"rows"`
}

// label drops the residual size: "int4:kt128:v128:res128" -> "int4:kt128:v128".
func label(spec string) string {
	var keep []string
	for _, p := range strings.Split(spec, ":") {
		if !strings.HasPrefix(p, "res") {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ":")
}

type point struct{ b, l int }

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: gonumplot gpu_attn.json out.png")
	}
	buf, err := os.ReadFile(os.Args[1])
	if err != nil {
		log.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(buf, &rep); err != nil {
		log.Fatal(err)
	}
	var fmts []string
	speed := map[string]map[point]float64{}
	pts := map[point]bool{}
	for _, r := range rep.Rows {
		if r.Speedup == 0 {
			continue
		}
		f := label(r.Format)
		if speed[f] == nil {
			speed[f] = map[point]float64{}
			fmts = append(fmts, f)
		}
		speed[f][point{r.B, r.L}] = r.Speedup
		pts[point{r.B, r.L}] = true
	}
	var points []point
	for p := range pts {
		points = append(points, p)
	}
	sort.Slice(points, func(i, j int) bool {
		a, b := points[i], points[j]
		if a.b*a.l != b.b*b.l {
			return a.b*a.l < b.b*b.l
		}
		return a.b < b.b
	})

	left := plot.New()
	left.X.Label.Text = "context (tokens), batch 1"
	left.Y.Label.Text = "speedup vs PyTorch SDPA fp16"
	left.X.Scale = plot.LogScale{}
	left.X.Tick.Marker = plot.LogTicks{Prec: -1}
	left.Add(plotter.NewGrid())
	for i, f := range fmts {
		var xy plotter.XYs
		for _, p := range points {
			if v, ok := speed[f][p]; ok && p.b == 1 {
				xy = append(xy, plotter.XY{X: float64(p.l), Y: v})
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			log.Fatal(err)
		}
		l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
		s.Shape = draw.CircleGlyph{}
		left.Add(l, s)
		left.Legend.Add(f, l, s)
	}
	one, _ := plotter.NewLine(plotter.XYs{{X: 4096, Y: 1}, {X: 262144, Y: 1}})
	one.Color, one.Dashes = color.Gray{128}, []vg.Length{vg.Points(3), vg.Points(3)}
	left.Add(one)
	left.Legend.Top, left.Legend.Left = true, true

	right := plot.New()
	right.Title.Text = fmt.Sprintf("bitdecode decode attention, Hq=32 Hkv=8 D=128, %s (%s)", rep.Device, rep.Date)
	right.X.Label.Text = "batch x context"
	right.Add(plotter.NewGrid())
	w := vg.Points(48 / float64(len(fmts))) // a group narrower than the category spacing
	var names []string
	for _, p := range points {
		names = append(names, fmt.Sprintf("%dx%dK", p.b, p.l/1024))
	}
	for i, f := range fmts {
		var vs plotter.Values
		for _, p := range points {
			vs = append(vs, speed[f][p])
		}
		bars, err := plotter.NewBarChart(vs, 0.85*w)
		if err != nil {
			log.Fatal(err)
		}
		bars.Color, bars.LineStyle.Width = plotutil.Color(i), 0
		bars.Offset = vg.Length(float64(i)-float64(len(fmts)-1)/2) * w
		right.Add(bars)
		right.Legend.Add(f, bars)
	}
	right.NominalX(names...)
	right.Y.Min, right.Y.Max = 0, 1.4*right.Y.Max // room above the bars for the legend
	right.Y.Label.Text = "speedup vs PyTorch SDPA fp16"
	right.Legend.Top = true

	img := vgimg.New(13*vg.Inch, 4.5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	left.Draw(tiles.At(dc, 0, 0))
	right.Draw(tiles.At(dc, 1, 0))
	f, err := os.Create(os.Args[2])
	if err != nil {
		log.Fatal(err)
	}
	png := vgimg.PngCanvas{Canvas: img}
	if _, err := png.WriteTo(f); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", os.Args[2])
}
