package gpu

// GEMMQRoutes is gemmqRoutes for the package's external tests: whether
// Linear gives T rows of x over a tiled int-bits [N, K] weight to gemmq.cu.
var GEMMQRoutes = gemmqRoutes
