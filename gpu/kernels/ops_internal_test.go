package kernels

import (
	"regexp"
	"strconv"
	"testing"
)

// TestOpsClusterConstants: ops.go's add_rmsnorm_cluster geometry is ops.cu's.
func TestOpsClusterConstants(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{"kNormMaxThreads", normMaxThreads},
		{"kNormCluster", normCluster},
		{"kNormClusterThreads", normClusterThreads},
		{"kNormClusterRegs", NormClusterMaxG / NormClusterMinG},
	} {
		m := regexp.MustCompile(`constexpr int ` + c.name + ` = (\d+);`).FindStringSubmatch(opsSource)
		if m == nil {
			t.Errorf("ops.cu has no constexpr int %s", c.name)
			continue
		}
		if v, _ := strconv.Atoi(m[1]); v != c.want {
			t.Errorf("ops.cu's %s = %d, ops.go's %d", c.name, v, c.want)
		}
	}
}
