package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"sort"
)

//go:embed bandwidth.cu
var bandwidthSource string

// Bandwidth probe parameters.
const (
	probeKernel       = "read_bandwidth"
	probeBlockThreads = 256     // kThreads in bandwidth.cu
	probeBytes        = 1 << 30 // 1 GiB, 20x the H100's 50 MB L2
	probeWordBytes    = 16      // one uint4 load
	probeWarmups      = 2
	probeRuns         = 9 // odd, so the median is one run
)

// Bandwidth is the result of [Device.ProbeBandwidth].
type Bandwidth struct {
	Bytes    int64   // bytes read per run
	Runs     int     // timed runs
	MedianMS float64 // median run time, milliseconds
	MinMS    float64 // fastest run
	MaxMS    float64 // slowest run
	GBps     float64 // Bytes / MedianMS, in 1e9 bytes per second
}

// ProbeBandwidth measures read bandwidth from device memory: an embedded
// kernel (bandwidth.cu) streams 1 GiB with 16-byte loads; each of several
// runs is timed with events and the median is reported. It needs NVRTC and
// about 1 GiB of free device memory.
func (d *Device) ProbeBandwidth() (Bandwidth, error) {
	mod, err := d.Compile(Program{Name: "bandwidth.cu", Source: bandwidthSource})
	if err != nil {
		return Bandwidth{}, fmt.Errorf("bandwidth probe: %w", err)
	}
	fn, err := mod.Function(probeKernel)
	if err != nil {
		return Bandwidth{}, fmt.Errorf("bandwidth probe: %w", err)
	}
	var bw Bandwidth
	err = d.Do(func(c *Ctx) (err error) {
		bw, err = c.probeBandwidth(fn)
		return err
	})
	if err != nil {
		return Bandwidth{}, fmt.Errorf("bandwidth probe: %w", err)
	}
	return bw, nil
}

func (c *Ctx) probeBandwidth(fn Function) (bw Bandwidth, err error) {
	s := c.d.stream
	src, err := c.Alloc(probeBytes)
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, c.Free(src)) }()
	sink, err := c.Alloc(probeWordBytes)
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, c.Free(sink)) }()
	if err := c.Memset8Async(src, 0, probeBytes, s); err != nil {
		return bw, err
	}
	perSM, err := c.MaxActiveBlocksPerSM(fn, probeBlockThreads, 0)
	if err != nil {
		return bw, err
	}
	grid := Dim3{X: max(1, perSM) * c.d.props.sms}
	block := Dim3{X: probeBlockThreads}
	n16 := uint64(probeBytes / probeWordBytes)

	start, err := c.NewEvent()
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, c.DestroyEvent(start)) }()
	end, err := c.NewEvent()
	if err != nil {
		return bw, err
	}
	defer func() { err = errors.Join(err, c.DestroyEvent(end)) }()

	for range probeWarmups {
		if err := c.Launch(fn, grid, block, 0, s, src, n16, sink); err != nil {
			return bw, err
		}
	}
	times := make([]float64, 0, probeRuns)
	for range probeRuns {
		if err := c.Record(start, s); err != nil {
			return bw, err
		}
		if err := c.Launch(fn, grid, block, 0, s, src, n16, sink); err != nil {
			return bw, err
		}
		if err := c.Record(end, s); err != nil {
			return bw, err
		}
		ms, err := c.ElapsedMS(start, end)
		if err != nil {
			return bw, err
		}
		times = append(times, float64(ms))
	}
	if err := c.SyncStream(s); err != nil {
		return bw, err
	}
	sort.Float64s(times)
	bw = Bandwidth{
		Bytes: probeBytes, Runs: probeRuns,
		MedianMS: times[len(times)/2], MinMS: times[0], MaxMS: times[len(times)-1],
	}
	if bw.MedianMS > 0 {
		bw.GBps = float64(bw.Bytes) / (bw.MedianMS * 1e-3) / 1e9
	}
	return bw, nil
}

// Info describes a device and the CUDA libraries, for `bitdecode inspect
// gpu`. Library fields that could not be read are empty, with the reason in
// the matching Error field.
type Info struct {
	Ordinal                     int
	Name                        string // e.g. "NVIDIA H100 80GB HBM3"
	ComputeMajor, ComputeMinor  int    // e.g. 9, 0
	Arch                        string // NVRTC target, e.g. "sm_90a"
	SMs                         int
	MemTotalBytes, MemFreeBytes uint64
	L2Bytes                     int
	SharedPerBlockOptinBytes    int // max shared memory per block after opting in
	SharedPerSMBytes            int
	MemClockKHz, BusWidthBits   int // peak memory clock and bus width, for the theoretical bandwidth

	DriverVersion   string // CUDA version the driver supports, e.g. "13.0"
	NVRTCVersion    string // e.g. "13.0"
	NVRTCLibrary    string
	NVRTCError      string
	IncludeDir      string // CUDA headers for kernels, "" if not found
	CUBLASLtVersion string // e.g. "13.1.0"
	CUBLASLtError   string

	Cache      CacheStats
	CacheError string

	Bandwidth      *Bandwidth // nil unless probed
	BandwidthError string
}

// PeakGBps returns the theoretical memory bandwidth from the memory clock and
// bus width (double data rate), in 1e9 bytes per second, or 0 if unknown.
func (i Info) PeakGBps() float64 {
	return 2 * float64(i.MemClockKHz) * 1e3 * float64(i.BusWidthBits) / 8 / 1e9
}

// Info collects the device's properties, memory, library versions and cache
// state. With probe set it also runs [Device.ProbeBandwidth] (a second or
// two). Missing NVRTC or cuBLASLt is reported in the Info, not as an error.
func (d *Device) Info(probe bool) (Info, error) {
	p := d.props
	in := Info{
		Ordinal: d.ordinal, Name: p.name,
		ComputeMajor: p.major, ComputeMinor: p.minor, Arch: d.Arch(),
		SMs: p.sms, MemTotalBytes: p.memTotal, L2Bytes: p.l2Bytes,
		SharedPerBlockOptinBytes: p.sharedPerBlockOptin, SharedPerSMBytes: p.sharedPerSM,
		MemClockKHz: p.memClockKHz, BusWidthBits: p.busWidth,
	}
	v, err := d.drv.version()
	if err != nil {
		return in, err
	}
	in.DriverVersion = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	if err := d.Do(func(c *Ctx) error {
		var err error
		in.MemFreeBytes, _, err = c.MemInfo()
		return err
	}); err != nil {
		return in, err
	}
	if n, err := NVRTC(); err != nil {
		in.NVRTCError = err.Error()
	} else {
		in.NVRTCVersion, in.NVRTCLibrary, in.IncludeDir = n.Version, n.Library, n.IncludeDir
	}
	if lv, err := CUBLASLtVersion(); err != nil {
		in.CUBLASLtError = err.Error()
	} else {
		in.CUBLASLtVersion = lv
	}
	if probe {
		if bw, err := d.ProbeBandwidth(); err != nil {
			in.BandwidthError = err.Error()
		} else {
			in.Bandwidth = &bw
		}
	}
	if cs, err := CacheInfo(); err != nil {
		in.CacheError = err.Error()
	} else {
		in.Cache = cs
	}
	return in, nil
}

// Inspect opens device ordinal, collects its [Info] and closes it.
func Inspect(ordinal int, probe bool) (Info, error) {
	d, err := Open(ordinal)
	if err != nil {
		return Info{}, err
	}
	in, err := d.Info(probe)
	return in, errors.Join(err, d.Close())
}
