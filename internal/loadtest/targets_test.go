package loadtest

import (
	"reflect"
	"testing"
)

func TestTargetsOf(t *testing.T) {
	one := func(v float64) Spread { return SpreadOf([]float64{v}) }
	type verdict struct {
		Figure string
		Met    bool
	}
	tests := []struct {
		name     string
		scenario string
		figures  map[string]Spread
		want     []verdict
	}{
		{"NATS: the stored time stands for the ack", ScenarioEventsNATS,
			map[string]Spread{"closed events/s": one(2500), "paced publish→stored p99 ms": one(40), "paced publish→read p99 ms": one(140)},
			[]verdict{{"closed events/s", true}, {"paced publish→stored p99 ms", true}}},
		{"AMQP: the read bounds the ack", ScenarioEventsAMQP,
			map[string]Spread{"closed events/s": one(1999), "paced publish→read p99 ms": one(100)},
			[]verdict{{"closed events/s", false}, {"paced publish→read p99 ms", false}}},
		{"the median decides, not the best run", ScenarioEventsAMQP,
			map[string]Spread{"closed events/s": SpreadOf([]float64{1500, 1800, 2600})},
			[]verdict{{"closed events/s", false}}},
		{"stream within every target", ScenarioEventsStream,
			map[string]Spread{"readers connected": one(100), "offered events/s": one(200), "missing per reader max": one(0),
				"publish→read p99 ms": one(60), "peak_rss_mb": one(120)},
			[]verdict{{"readers connected", true}, {"publish→read p99 ms", true}, {"gateway peak RSS MB", true}}},
		{"a reader missing an event in any run fails the load target", ScenarioEventsStream,
			map[string]Spread{"readers connected": one(100), "offered events/s": one(200), "missing per reader max": SpreadOf([]float64{0, 0, 3}),
				"publish→read p99 ms": one(100), "peak_rss_mb": one(150)},
			[]verdict{{"readers connected", false}, {"publish→read p99 ms", false}, {"gateway peak RSS MB", false}}},
		{"fewer readers or a lower rate than the issue's", ScenarioEventsStream,
			map[string]Spread{"readers connected": one(100), "offered events/s": one(50), "missing per reader max": one(0)},
			[]verdict{{"readers connected", false}}},
		{"other scenarios have none", ScenarioFanout, map[string]Spread{"closed events/s": one(9000)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []verdict
			for _, tg := range targetsOf(tt.scenario, tt.figures) {
				got = append(got, verdict{tg.Figure, tg.Met})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
