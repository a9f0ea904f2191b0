package jinja

// RenderSteps is Render, also returning the steps it counted against
// Limits.MaxSteps (for the external tests).
func (t *Template) RenderSteps(vars map[string]Value, opts Options) (string, int, error) {
	return t.render(vars, opts)
}
