package gpu

// GEMMQMaxRowsFor is gemmqMaxRowsFor for the package's external tests: the
// most rows of x a packed weight of a code width runs gemmq.cu at.
var GEMMQMaxRowsFor = gemmqMaxRowsFor
