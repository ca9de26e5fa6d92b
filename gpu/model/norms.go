package model

// normWeights are the weights each RMSNorm multiplies by. For most families
// they are the parameters themselves; where the family offsets them
// (Config.NormOffset: gemma3_text's RMSNorm scales by 1 + weight) they are
// NormOffset + the parameters, in a tensor of their own that is recomputed
// (one add per norm, on the backend) whenever the parameters have changed.
// The gradient of a norm's weight is the same either way, so the backward
// accumulates it straight into the parameter's gradient.
type normWeights struct {
	ln1, ln2, pre, post, qn, kn [][]float32 // per layer; nil entries where the family has no such norm
	final                       []float32

	params  *Params   // the parameters the views were made for
	data    []float32 // the offset weights (NormOffset != 0), a backend tensor
	offset  []float32 // NormOffset, as many as the widest norm (a backend tensor)
	version uint64    // params.version when data was computed
	fresh   bool      // data holds the offset weights of params at version
}

// normW returns the weights the norms multiply by, recomputing the offset
// ones when the parameters changed since.
func (m *Model) normW() *normWeights {
	c, p, be := m.Config, m.Params, m.be
	nw := m.norms
	if nw == nil || nw.params != p {
		if nw != nil && nw.data != nil {
			be.Free(nw.data)
			be.Free(nw.offset)
		}
		nw = &normWeights{params: p}
		m.norms = nw
		n := len(p.NormF)
		for l := range p.Layers {
			lp := &p.Layers[l]
			n += len(lp.LN1) + len(lp.LN2) + len(lp.PreFFN) + len(lp.PostFFN) + len(lp.QNorm) + len(lp.KNorm)
		}
		off := 0
		view := func(w []float32) []float32 {
			if c.NormOffset == 0 || w == nil {
				return w
			}
			v := nw.data[off : off+len(w) : off+len(w)]
			off += len(w)
			return v
		}
		if c.NormOffset != 0 {
			nw.data = be.Alloc("norm weights (offset)", n)
			nw.offset = be.Alloc("norm weight offset", max(c.C, c.HD))
			ones := make([]float32, max(c.C, c.HD))
			for i := range ones {
				ones[i] = c.NormOffset
			}
			be.Upload(nw.offset, ones)
		}
		for l := range p.Layers {
			lp := &p.Layers[l]
			nw.ln1 = append(nw.ln1, view(lp.LN1))
			nw.ln2 = append(nw.ln2, view(lp.LN2))
			nw.pre = append(nw.pre, view(lp.PreFFN))
			nw.post = append(nw.post, view(lp.PostFFN))
			nw.qn = append(nw.qn, view(lp.QNorm))
			nw.kn = append(nw.kn, view(lp.KNorm))
		}
		nw.final = view(p.NormF)
	}
	if c.NormOffset != 0 && (!nw.fresh || nw.version != p.version) {
		add := func(dst, w []float32) {
			if w != nil {
				be.ResidualForward(dst, w, nw.offset[:len(w)], len(w))
			}
		}
		for l := range p.Layers {
			lp := &p.Layers[l]
			add(nw.ln1[l], lp.LN1)
			add(nw.ln2[l], lp.LN2)
			add(nw.pre[l], lp.PreFFN)
			add(nw.post[l], lp.PostFFN)
			add(nw.qn[l], lp.QNorm)
			add(nw.kn[l], lp.KNorm)
		}
		add(nw.final, p.NormF)
		nw.version, nw.fresh = p.version, true
	}
	return nw
}
