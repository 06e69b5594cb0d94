package metrics

import "github.com/prometheus/client_golang/prometheus"

// configMetrics follow the bridge's configuration: its generation, and the
// reloads that took it or were refused.
type configMetrics struct {
	generation prometheus.Gauge
	reloads    *prometheus.CounterVec // result
}

// The results of a reload.
const (
	ReloadOK      = "ok"
	ReloadRefused = "refused"
)

func newConfigMetrics() configMetrics {
	c := configMetrics{
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kafka2pg_config_generation",
			Help: "The generation of the running configuration: 1 at start, one more for each reload that took effect."}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka2pg_config_reloads_total",
			Help: "Reloads of the configuration, by result: ok (it runs), refused (it was invalid, and the running one stays)."}, []string{"result"}),
	}
	c.generation.Set(1)
	for _, r := range []string{ReloadOK, ReloadRefused} {
		c.reloads.WithLabelValues(r)
	}
	return c
}

// Reloaded records a reload's result and the generation running after it.
func (m *Metrics) Reloaded(result string, generation int64) {
	m.config.reloads.WithLabelValues(result).Inc()
	m.config.generation.Set(float64(generation))
}
