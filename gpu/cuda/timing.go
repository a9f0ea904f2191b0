package cuda

import "sort"

// MedianUS times step with a pair of events on stream s: warmups untimed
// runs, then runs timed ones (each run synchronized on its end event), and
// returns the median in microseconds. step(i) gets the run index, so callers
// can rotate inputs. It must only queue work on s.
func (c *Ctx) MedianUS(s Stream, warmups, runs int, step func(i int) error) (float64, error) {
	e0, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e0)
	e1, err := c.NewEvent()
	if err != nil {
		return 0, err
	}
	defer c.DestroyEvent(e1)
	times := make([]float64, 0, runs)
	for i := 0; i < warmups+runs; i++ {
		if err := c.Record(e0, s); err != nil {
			return 0, err
		}
		if err := step(i); err != nil {
			return 0, err
		}
		if err := c.Record(e1, s); err != nil {
			return 0, err
		}
		if err := c.SyncEvent(e1); err != nil {
			return 0, err
		}
		ms, err := c.ElapsedMS(e0, e1)
		if err != nil {
			return 0, err
		}
		if i >= warmups {
			times = append(times, float64(ms)*1e3)
		}
	}
	if len(times) == 0 {
		return 0, nil
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}
