package metrics

import (
	"errors"
	"math"
)

// Panel is one chart of a figure drawn by [PlotFigure]: its series share the x axis (the
// step) with the other panels.
type Panel struct {
	Title, YLabel string
	Series        []Series
	// Fraction shows the y axis as 0..1 when every value is in it.
	Fraction bool
}

// Series is one curve; X and Y have the same length. NaN and infinite points are left out.
type Series struct {
	Label   string
	X, Y    []float64
	Markers bool
}

// PlotFigure draws panels side by side under heading into a PNG file at out, in the style of
// the training curves ([Plot]): for figures of other runs (SFT) and of comparisons between
// runs.
func PlotFigure(out, heading string, panels []Panel) error {
	if len(panels) == 0 {
		return errors.New("metrics: plot: no panels to draw")
	}
	ps := make([]panel, len(panels))
	next := 0
	for i, p := range panels {
		ps[i] = panel{title: p.Title, ylabel: p.YLabel, fraction: p.Fraction}
		for _, s := range p.Series {
			var xs, ys []float64
			for j := range s.X {
				if j < len(s.Y) && !math.IsNaN(s.Y[j]) && !math.IsInf(s.Y[j], 0) {
					xs, ys = append(xs, s.X[j]), append(ys, s.Y[j])
				}
			}
			c := palette[next%len(palette)]
			next++
			if len(xs) == 0 {
				continue
			}
			ps[i].series = append(ps[i].series, series{label: s.Label, color: c, xs: xs, ys: ys, markers: s.Markers})
		}
	}
	return writePNG(renderPanels(ps, heading), out)
}
