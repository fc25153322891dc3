package echo

// #cgo pkg-config: kissfft-float
// #include <stdlib.h>
// #include <kiss_fftr.h>
import "C"

import (
	"runtime"
	"unsafe"
)

// realFFT is a real transform of n samples (n even) to their n/2+1 bins
// and back, by KISS FFT in single precision. A suppressor takes three
// transforms a hop: gonum's, in Go and double precision, took 3.5 to 4
// times as long at the two sizes used here (320 and 480 points), and
// were 60% of its CPU. Single precision is far more than the 16-bit
// audio and the band energies need. The state holds scratch space: one
// per analyser, never shared.
type realFFT struct {
	fwd, inv C.kiss_fftr_cfg
}

func newRealFFT(n int) *realFFT {
	f := &realFFT{fwd: C.kiss_fftr_alloc(C.int(n), 0, nil, nil), inv: C.kiss_fftr_alloc(C.int(n), 1, nil, nil)}
	if f.fwd == nil || f.inv == nil {
		panic("echo: KISS FFT could not allocate its state") // only out of memory
	}
	runtime.AddCleanup(f, func(c [2]C.kiss_fftr_cfg) {
		C.free(unsafe.Pointer(c[0]))
		C.free(unsafe.Pointer(c[1]))
	}, [2]C.kiss_fftr_cfg{f.fwd, f.inv})
	return f
}

// forward takes the n samples of in to their n/2+1 bins in out.
func (f *realFFT) forward(out []complex64, in []float32) {
	C.kiss_fftr(f.fwd, (*C.float)(unsafe.Pointer(&in[0])), (*C.kiss_fft_cpx)(unsafe.Pointer(&out[0])))
}

// inverse takes n/2+1 bins back to n samples, unscaled: n times the
// signal whose bins they are.
func (f *realFFT) inverse(out []float32, in []complex64) {
	C.kiss_fftri(f.inv, (*C.kiss_fft_cpx)(unsafe.Pointer(&in[0])), (*C.float)(unsafe.Pointer(&out[0])))
}
