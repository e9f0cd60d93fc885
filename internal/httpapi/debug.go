package httpapi

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DebugHandler serves the runtime profiles (pprof) and the registry of
// tuning figures (/debug/metrics) for the opt-in debug listener
// (DEBUG_LISTEN).
// It is a mux of its own, never mounted on the public handler: profiles
// reveal internals and a CPU profile costs a core for its duration.
func DebugHandler(tuning *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // also heap, goroutine, allocs, block, mutex, threadcreate
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	if tuning != nil {
		mux.Handle("/debug/metrics", promhttp.HandlerFor(tuning, promhttp.HandlerOpts{}))
	}
	return mux
}
