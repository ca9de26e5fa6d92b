package metrics

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"
	"golang.org/x/image/vector"
)

// Figure geometry, in pixels.
const (
	panelW   = 560
	panelH   = 420
	titleH   = 44
	marginL  = 74 // y tick labels and the rotated y label
	marginR  = 22
	marginT  = 34 // the panel title
	marginB  = 54 // x tick labels and the x label
	lineW    = 2.2
	markerR  = 3.6
	maxTicks = 6
)

// tab10, the palette matplotlib users know.
var palette = []color.RGBA{
	{0x1f, 0x77, 0xb4, 0xff}, {0xff, 0x7f, 0x0e, 0xff}, {0x2c, 0xa0, 0x2c, 0xff}, {0xd6, 0x27, 0x28, 0xff},
	{0x94, 0x67, 0xbd, 0xff}, {0x8c, 0x56, 0x4b, 0xff}, {0xe3, 0x77, 0xc2, 0xff}, {0x7f, 0x7f, 0x7f, 0xff},
	{0xbc, 0xbd, 0x22, 0xff}, {0x17, 0xbe, 0xcf, 0xff},
}

var (
	white     = color.RGBA{0xff, 0xff, 0xff, 0xff}
	ink       = color.RGBA{0x22, 0x22, 0x22, 0xff}
	axisGray  = color.RGBA{0x55, 0x55, 0x55, 0xff}
	gridGray  = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	plotBack  = color.RGBA{0xfb, 0xfb, 0xfb, 0xff}
	mutedText = color.RGBA{0x88, 0x88, 0x88, 0xff}
)

// series is one curve: points sorted by step, NaN and infinities left out.
type series struct {
	label   string
	color   color.RGBA
	xs, ys  []float64
	markers bool
	// lo, hi, when set, shade the band between them (e.g. response length min..max).
	lo, hi []float64
}

type panel struct {
	title, ylabel string
	series        []series
	fraction      bool // values are fractions: show 0..1 when they all are in it
	xmin, xmax    float64
}

// Plot draws the training curves of steps into a PNG file at out: the reward (train
// critic/score/mean, critic/rewards/mean when it differs, and the validation reward per
// data source), the accuracy when any */acc/* metric is present, and the response length
// (mean, with the min..max band) — each against the step. Repeated steps (a resumed run)
// take the last value; NaN and infinities are left out.
func Plot(steps []Step, out string) error {
	if len(steps) == 0 {
		return errors.New("metrics: plot: no steps to plot")
	}
	return writePNG(render(steps), out)
}

// writePNG writes img to out through a temporary file.
func writePNG(img image.Image, out string) error {
	if dir := filepath.Dir(out); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("metrics: plot: %w", err)
		}
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("metrics: plot: %w", err)
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("metrics: plot: %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("metrics: plot: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("metrics: plot: %w", err)
	}
	return nil
}

// PlotRun reads runDir/metrics.jsonl (a torn last line is ignored) and writes
// runDir/curves.png, whose path it returns.
func PlotRun(runDir string) (string, error) {
	steps, err := ReadJSONL(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil && !errors.Is(err, ErrTornLine) {
		return "", err
	}
	out := filepath.Join(runDir, "curves.png")
	if err := Plot(steps, out); err != nil {
		return "", err
	}
	return out, nil
}

// column gathers one metric over the steps: the last finite value of each step.
func column(steps []Step, key string) (xs, ys []float64) {
	last := map[int]float64{}
	for _, s := range steps {
		if v, ok := s.Values[key]; ok {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				delete(last, s.Step) // the newest value is unusable: show none
				continue
			}
			last[s.Step] = v
		}
	}
	keys := make([]int, 0, len(last))
	for k := range last {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		xs = append(xs, float64(k))
		ys = append(ys, last[k])
	}
	return xs, ys
}

func allKeys(steps []Step) []string {
	seen := map[string]bool{}
	for _, s := range steps {
		for k := range s.Values {
			seen[k] = true
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// isAccuracy reports keys with an "acc" or "accuracy" path segment.
func isAccuracy(key string) bool {
	for _, seg := range strings.Split(key, "/") {
		if seg == "acc" || seg == "accuracy" {
			return true
		}
	}
	return false
}

// shortLabel names a validation key by its data source ("val openai/gsm8k").
func shortLabel(key string) string {
	if rest, ok := strings.CutPrefix(key, "val-core/"); ok {
		if i := strings.LastIndex(rest, "/"); i > 0 {
			if j := strings.LastIndex(rest[:i], "/"); j > 0 {
				return "val " + rest[:j]
			}
		}
	}
	return key
}

// panels chooses what to draw.
func panels(steps []Step) []panel {
	keys := allKeys(steps)
	next := 0
	pick := func() color.RGBA { c := palette[next%len(palette)]; next++; return c }

	reward := panel{title: "Reward", ylabel: "mean reward"}
	if xs, ys := column(steps, ScoreMean); len(xs) > 0 {
		reward.series = append(reward.series, series{label: "train score", color: pick(), xs: xs, ys: ys})
	} else {
		next++
	}
	if xs, ys := column(steps, RewardMean); len(xs) > 0 {
		sx, sy := column(steps, ScoreMean)
		if !slices.Equal(xs, sx) || !slices.Equal(ys, sy) {
			reward.series = append(reward.series, series{label: "train reward (with penalties)", color: pick(), xs: xs, ys: ys})
		}
	}
	for _, k := range keys {
		if _, ok := valDataSource(k); ok {
			xs, ys := column(steps, k)
			if len(xs) > 0 {
				reward.series = append(reward.series, series{label: shortLabel(k), color: pick(), xs: xs, ys: ys, markers: true})
			}
		}
	}
	out := []panel{reward}

	acc := panel{title: "Accuracy", ylabel: "accuracy", fraction: true}
	for _, k := range keys {
		if isAccuracy(k) {
			if xs, ys := column(steps, k); len(xs) > 0 {
				acc.series = append(acc.series, series{label: shortLabel(k), color: pick(), xs: xs, ys: ys, markers: strings.HasPrefix(k, "val")})
			}
		}
	}
	if len(acc.series) > 0 {
		out = append(out, acc)
	}

	length := panel{title: "Response length", ylabel: "tokens"}
	if xs, ys := column(steps, ResponseLengthMean); len(xs) > 0 {
		s := series{label: "mean response length", color: palette[4], xs: xs, ys: ys}
		lx, lo := column(steps, ResponseLengthMin)
		hx, hi := column(steps, ResponseLengthMax)
		if slices.Equal(lx, xs) && slices.Equal(hx, xs) {
			s.lo, s.hi = lo, hi
			s.label = "mean response length (band: min..max)"
		}
		length.series = append(length.series, s)
	}
	return append(out, length)
}

// faces holds the fonts of one figure.
type faces struct {
	tick, label, title, heading font.Face
}

func newFaces() faces {
	regular, err := opentype.Parse(goregular.TTF)
	if err != nil {
		panic(err) // the embedded Go fonts always parse
	}
	bold, err := opentype.Parse(gobold.TTF)
	if err != nil {
		panic(err)
	}
	face := func(f *opentype.Font, size float64) font.Face {
		fc, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
		if err != nil {
			panic(err)
		}
		return fc
	}
	return faces{tick: face(regular, 12), label: face(regular, 13), title: face(bold, 15), heading: face(bold, 18)}
}

func render(steps []Step) *image.RGBA {
	ps := panels(steps)
	first, last := steps[0].Step, steps[0].Step
	for _, s := range steps {
		first, last = min(first, s.Step), max(last, s.Step)
	}
	heading := fmt.Sprintf("Training curves — steps %d to %d", first, last)
	if first == last {
		heading = fmt.Sprintf("Training curves — step %d", first)
	}
	return renderPanels(ps, heading)
}

// renderPanels draws the panels side by side under the heading.
func renderPanels(ps []panel, heading string) *image.RGBA {
	w, h := panelW*len(ps), panelH+titleH
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	fc := newFaces()
	drawText(img, fc.heading, ink, (w-textWidth(fc.heading, heading))/2, 30, heading)
	// One step axis for all panels, so that they line up.
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, p := range ps {
		for _, s := range p.series {
			for _, x := range s.xs {
				xmin, xmax = min(xmin, x), max(xmax, x)
			}
		}
	}
	z := newLayer()
	for i, p := range ps {
		p.xmin, p.xmax = xmin, xmax
		drawPanel(img, z, fc, image.Rect(i*panelW, titleH, (i+1)*panelW, titleH+panelH), p)
	}
	return img
}

func drawPanel(img *image.RGBA, z *layer, fc faces, r image.Rectangle, p panel) {
	plot := image.Rect(r.Min.X+marginL, r.Min.Y+marginT, r.Max.X-marginR, r.Max.Y-marginB)
	drawText(img, fc.title, ink, plot.Min.X+(plot.Dx()-textWidth(fc.title, p.title))/2, r.Min.Y+22, p.title)
	fillRect(img, plot, plotBack)

	if len(p.series) == 0 {
		msg := "no data"
		drawText(img, fc.label, mutedText, plot.Min.X+(plot.Dx()-textWidth(fc.label, msg))/2, plot.Min.Y+plot.Dy()/2, msg)
		strokeRect(img, plot, axisGray)
		return
	}

	// Data ranges, then nice axes around them.
	xmin, xmax, ymin, ymax := p.xmin, p.xmax, math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for i := range s.xs {
			ymin, ymax = min(ymin, s.ys[i]), max(ymax, s.ys[i])
		}
		for i := range s.lo {
			ymin, ymax = min(ymin, s.lo[i]), max(ymax, s.hi[i])
		}
	}
	xt := niceTicks(xmin, xmax, maxTicks, true)
	var yt []float64
	switch {
	case p.fraction && ymin >= 0 && ymax <= 1:
		yt = niceTicks(0, 1, maxTicks, false)
	case ymin >= 0: // no negative axis for values that cannot be negative
		yt = niceTicks(ymin, ymax, maxTicks, false)
		if yt[0] < 0 {
			yt = niceTicks(0, max(ymax, yt[len(yt)-1]), maxTicks, false)
		}
	default:
		yt = niceTicks(ymin, ymax, maxTicks, false)
	}
	x0, x1 := xt[0], xt[len(xt)-1]
	y0, y1 := yt[0], yt[len(yt)-1]
	// A little air between the data and the frame.
	padX, padY := 0.03*(x1-x0), 0.05*(y1-y0)
	x0, x1, y0, y1 = x0-padX, x1+padX, y0-padY, y1+padY
	px := func(x float64) float32 {
		return float32(float64(plot.Min.X) + (x-x0)/(x1-x0)*float64(plot.Dx()))
	}
	py := func(y float64) float32 {
		return float32(float64(plot.Max.Y) - (y-y0)/(y1-y0)*float64(plot.Dy()))
	}

	// Grid and tick labels.
	xdec, ydec := decimals(xt), decimals(yt)
	for _, t := range xt {
		x := int(math.Round(float64(px(t))))
		fillRect(img, image.Rect(x, plot.Min.Y, x+1, plot.Max.Y), gridGray)
		fillRect(img, image.Rect(x, plot.Max.Y, x+1, plot.Max.Y+5), axisGray)
		s := tickLabel(t, xdec)
		drawText(img, fc.tick, ink, x-textWidth(fc.tick, s)/2, plot.Max.Y+19, s)
	}
	for _, t := range yt {
		y := int(math.Round(float64(py(t))))
		fillRect(img, image.Rect(plot.Min.X, y, plot.Max.X, y+1), gridGray)
		fillRect(img, image.Rect(plot.Min.X-5, y, plot.Min.X, y+1), axisGray)
		s := tickLabel(t, ydec)
		drawText(img, fc.tick, ink, plot.Min.X-8-textWidth(fc.tick, s), y+4, s)
	}
	strokeRect(img, plot, axisGray)
	xl := "step"
	drawText(img, fc.label, ink, plot.Min.X+(plot.Dx()-textWidth(fc.label, xl))/2, plot.Max.Y+42, xl)
	drawTextUp(img, fc.label, ink, r.Min.X+16, plot.Min.Y+plot.Dy()/2, p.ylabel)

	// Bands first, then lines, then markers, so that lines stay on top of the shading.
	for _, s := range p.series {
		if len(s.lo) == 0 {
			continue
		}
		z.begin(plot)
		pts := make([][2]float32, 0, 2*len(s.xs))
		for i := range s.xs {
			pts = append(pts, [2]float32{px(s.xs[i]), py(s.hi[i])})
		}
		for i := len(s.xs) - 1; i >= 0; i-- {
			pts = append(pts, [2]float32{px(s.xs[i]), py(s.lo[i])})
		}
		if len(s.xs) == 1 { // a band of one step: a short vertical bar
			pts = [][2]float32{{pts[0][0] - 3, pts[0][1]}, {pts[0][0] + 3, pts[0][1]}, {pts[1][0] + 3, pts[1][1]}, {pts[1][0] - 3, pts[1][1]}}
		}
		z.polygon(pts)
		c := s.color
		z.fill(img, color.NRGBA{c.R, c.G, c.B, 0x30})
	}
	for _, s := range p.series {
		if len(s.xs) < 2 {
			continue
		}
		z.begin(plot)
		for i := 1; i < len(s.xs); i++ {
			z.segment(px(s.xs[i-1]), py(s.ys[i-1]), px(s.xs[i]), py(s.ys[i]), lineW/2)
			if i > 1 {
				z.circle(px(s.xs[i-1]), py(s.ys[i-1]), lineW/2)
			}
		}
		z.fill(img, s.color)
	}
	for _, s := range p.series {
		if !s.markers && len(s.xs) > 1 && len(s.xs) <= 40 {
			s.markers = true // few points: show where they are
		}
		if !s.markers && len(s.xs) > 1 {
			continue
		}
		z.begin(plot)
		for i := range s.xs {
			z.circle(px(s.xs[i]), py(s.ys[i]), markerR)
		}
		z.fill(img, s.color)
	}
	drawLegend(img, z, fc, plot, p, px, py)
}

// drawLegend puts the legend in the corner of the plot that hides the fewest points.
func drawLegend(img *image.RGBA, z *layer, fc faces, plot image.Rectangle, p panel, px, py func(float64) float32) {
	const pad, rowH, sample = 8, 18, 22
	w := 0
	for _, s := range p.series {
		w = max(w, textWidth(fc.tick, s.label))
	}
	w += 2*pad + sample + 6
	h := 2*pad + rowH*len(p.series) - 4
	corners := []image.Point{
		{plot.Min.X + 8, plot.Min.Y + 8}, {plot.Max.X - 8 - w, plot.Min.Y + 8},
		{plot.Min.X + 8, plot.Max.Y - 8 - h}, {plot.Max.X - 8 - w, plot.Max.Y - 8 - h},
	}
	best, bestHidden := corners[0], math.MaxInt
	for _, c := range corners {
		box := image.Rect(c.X, c.Y, c.X+w, c.Y+h).Inset(-6)
		hidden := 0
		for _, s := range p.series {
			for i := range s.xs {
				pt := image.Pt(int(px(s.xs[i])), int(py(s.ys[i])))
				if pt.In(box) {
					hidden += 10
				}
				if len(s.lo) > 0 {
					if image.Pt(pt.X, int(py(s.lo[i]))).In(box) || image.Pt(pt.X, int(py(s.hi[i]))).In(box) {
						hidden++
					}
				}
			}
		}
		if hidden < bestHidden {
			best, bestHidden = c, hidden
		}
	}
	box := image.Rect(best.X, best.Y, best.X+w, best.Y+h)
	draw.Draw(img, box, image.NewUniform(color.NRGBA{0xff, 0xff, 0xff, 0xe6}), image.Point{}, draw.Over)
	strokeRect(img, box, color.RGBA{0xcc, 0xcc, 0xcc, 0xff})
	for i, s := range p.series {
		y := float32(box.Min.Y + pad + rowH*i + 6)
		x := float32(box.Min.X + pad)
		z.begin(box)
		if len(s.lo) > 0 {
			z.polygon([][2]float32{{x, y - 6}, {x + sample, y - 6}, {x + sample, y + 6}, {x, y + 6}})
			c := s.color
			z.fill(img, color.NRGBA{c.R, c.G, c.B, 0x30})
			z.begin(box)
		}
		z.segment(x, y, x+sample, y, lineW/2)
		if s.markers || len(s.xs) <= 40 {
			z.circle(x+sample/2, y, markerR)
		}
		z.fill(img, s.color)
		drawText(img, fc.tick, ink, int(x)+sample+6, int(y)+4, s.label)
	}
}

// niceTicks returns 2 to about n round tick values covering [lo, hi] (Heckbert's "nice
// numbers"); integer ticks only when integer is set.
func niceTicks(lo, hi float64, n int, integer bool) []float64 {
	if hi-lo < 1e-12*max(1, math.Abs(hi)) { // one value: make room around it
		d := math.Max(math.Abs(lo)*0.1, 0.5)
		if integer {
			d = 1
		}
		lo, hi = lo-d, hi+d
	}
	step := niceNum((hi-lo)/float64(n-1), true)
	if integer {
		step = math.Max(1, math.Round(step))
	}
	start, end := math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	var ticks []float64
	for i := 0; ; i++ {
		t := start + float64(i)*step
		if t > end+step*1e-9 || i > 100 {
			break
		}
		if math.Abs(t) < step*1e-9 {
			t = 0 // not -0 or 1e-17
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func niceNum(x float64, round bool) float64 {
	exp := math.Floor(math.Log10(x))
	f := x / math.Pow(10, exp)
	var nf float64
	switch {
	case round && f < 1.5, !round && f <= 1:
		nf = 1
	case round && f < 3, !round && f <= 2:
		nf = 2
	case round && f < 7, !round && f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * math.Pow(10, exp)
}

// decimals is how many decimals tell the ticks apart.
func decimals(ticks []float64) int {
	if len(ticks) < 2 {
		return 0
	}
	step := math.Abs(ticks[1] - ticks[0])
	return max(0, min(6, int(math.Ceil(-math.Log10(step)-1e-9))))
}

func tickLabel(v float64, dec int) string {
	if a := math.Abs(v); a >= 1e6 {
		return strings.Replace(fmt.Sprintf("%.3g", v), "e+0", "e", 1)
	}
	return fmt.Sprintf("%.*f", dec, v)
}

// layer rasterizes anti-aliased shapes inside one rectangle of the image (the plot area,
// a legend box), so that each draw touches only that rectangle and shapes are clipped to it.
type layer struct {
	z *vector.Rasterizer
	r image.Rectangle
}

func newLayer() *layer { return &layer{z: vector.NewRasterizer(1, 1)} }

// begin starts a new set of shapes in r.
func (l *layer) begin(r image.Rectangle) {
	l.r = r
	l.z.Reset(r.Dx(), r.Dy())
}

// fill paints the shapes added since begin with c.
func (l *layer) fill(img *image.RGBA, c color.Color) {
	l.z.Draw(img, l.r, image.NewUniform(c), image.Point{})
}

// polygon adds a closed polygon (image coordinates) with a positive signed area, so that
// overlapping shapes add up instead of cancelling.
func (l *layer) polygon(pts [][2]float32) {
	var area float32
	for i := range pts {
		a, b := pts[i], pts[(i+1)%len(pts)]
		area += a[0]*b[1] - b[0]*a[1]
	}
	if area < 0 {
		pts = slices.Clone(pts)
		slices.Reverse(pts)
	}
	ox, oy := float32(l.r.Min.X), float32(l.r.Min.Y)
	l.z.MoveTo(pts[0][0]-ox, pts[0][1]-oy)
	for _, p := range pts[1:] {
		l.z.LineTo(p[0]-ox, p[1]-oy)
	}
	l.z.ClosePath()
}

// segment adds a line segment of half-width hw as a quadrilateral.
func (l *layer) segment(ax, ay, bx, by, hw float32) {
	dx, dy := bx-ax, by-ay
	n := float32(math.Hypot(float64(dx), float64(dy)))
	if n == 0 {
		return
	}
	nx, ny := -dy/n*hw, dx/n*hw
	l.polygon([][2]float32{{ax + nx, ay + ny}, {bx + nx, by + ny}, {bx - nx, by - ny}, {ax - nx, ay - ny}})
}

func (l *layer) circle(cx, cy, r float32) {
	const n = 20
	pts := make([][2]float32, n)
	for i := range pts {
		a := 2 * math.Pi * float64(i) / n
		pts[i] = [2]float32{cx + r*float32(math.Cos(a)), cy + r*float32(math.Sin(a))}
	}
	l.polygon(pts)
}

func fillRect(img *image.RGBA, r image.Rectangle, c color.Color) {
	draw.Draw(img, r, image.NewUniform(c), image.Point{}, draw.Src)
}

func strokeRect(img *image.RGBA, r image.Rectangle, c color.Color) {
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), c)
	fillRect(img, image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), c)
	fillRect(img, image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), c)
	fillRect(img, image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), c)
}

func textWidth(f font.Face, s string) int {
	return font.MeasureString(f, s).Ceil()
}

// drawText draws s with its baseline at y, starting at x.
func drawText(img draw.Image, f font.Face, c color.Color, x, y int, s string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: f, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// drawTextUp draws s rotated a quarter turn counter-clockwise, centred vertically on cy,
// with the top of the letters at x.
func drawTextUp(img *image.RGBA, f font.Face, c color.Color, x, cy int, s string) {
	w := textWidth(f, s)
	m := f.Metrics()
	asc, h := m.Ascent.Ceil(), (m.Ascent + m.Descent).Ceil()
	mask := image.NewAlpha(image.Rect(0, 0, w, h))
	drawText(mask, f, color.Opaque, 0, asc, s)
	up := image.NewAlpha(image.Rect(0, 0, h, w))
	for yy := 0; yy < h; yy++ {
		for xx := 0; xx < w; xx++ {
			up.SetAlpha(yy, w-1-xx, mask.AlphaAt(xx, yy))
		}
	}
	dst := image.Rect(x, cy-w/2, x+h, cy-w/2+w)
	draw.DrawMask(img, dst, image.NewUniform(c), image.Point{}, up, image.Point{}, draw.Over)
}
