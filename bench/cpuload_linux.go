package bench

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// userHZ is the unit of /proc/stat's counters (USER_HZ, 100 on Linux).
const userHZ = 100

// cpuSample is one reading of the machine's busy CPU time (every core's
// user, nice, system, irq, softirq and steal time in /proc/stat) and this
// process's own CPU time (getrusage), both in seconds.
type cpuSample struct {
	busy, self float64
	ok         bool
}

// readCPU returns the machine's busy CPU seconds and this process's; ok is
// false where /proc/stat cannot be read.
func readCPU() cpuSample {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuSample{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuSample{}
	}
	// user nice system idle iowait irq softirq steal: all but idle and iowait.
	var jiffies float64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return cpuSample{}
		}
		jiffies += v
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuSample{}
	}
	self := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)*1e-6
	return cpuSample{busy: jiffies / userHZ, self: self, ok: true}
}
