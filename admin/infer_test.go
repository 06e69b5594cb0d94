package admin

import (
	"errors"
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/stream"
)

// A key path must be a column every sample has, of scalar values; the
// error names the request's field.
func TestInferRefusesBadKeys(t *testing.T) {
	smp := Samples{Partitions: 1, Values: [][]byte{[]byte(`{"id":1,"o":{"a":1},"m":[{"a":1}]}`), []byte(`{"o":{"a":2},"m":[]}`)}}
	for _, c := range []struct {
		name    string
		keyPath string
		want    string
	}{
		{"a key path missing from some samples", "id", "null or missing in some"},
		{"a key path of jsonb values", "m", "jsonb"},
		{"a key path that is not a column", "nope", "not a column"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := InferRequest{Topic: "t", Sample: 10, Mode: "upsert", KeyPath: c.keyPath, Nested: "flatten", Timeout: 1}
			_, err := Infer(t.Context(), nil, smp, r)
			fe := (*stream.FieldError)(nil)
			if !errors.As(err, &fe) || fe.Field != "admin.InferRequest.KeyPath" || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want admin.InferRequest.KeyPath saying %q", err, c.want)
			}
		})
	}
}

// Values in the Schema Registry wire format need a registry, and give an
// append sink only.
func TestInferOfWireFormatValuesNeedsARegistry(t *testing.T) {
	smp := Samples{Partitions: 1, Values: [][]byte{{0, 0, 0, 0, 10, 2, 'x'}}}
	r := InferRequest{Topic: "t", Sample: 1, Mode: "append", Nested: "flatten", Timeout: 1}
	fe := (*stream.FieldError)(nil)
	if _, err := Infer(t.Context(), nil, smp, r); !errors.As(err, &fe) || fe.Field != "registry.Config.URLs" {
		t.Errorf("without a registry: err = %v, want one naming registry.Config.URLs", err)
	}
	r.Mode, r.KeyPath = "upsert", "id"
	if _, err := Infer(t.Context(), nil, smp, r); !errors.As(err, &fe) || fe.Field != "admin.InferRequest.Mode" {
		t.Errorf("upsert: err = %v, want one naming admin.InferRequest.Mode", err)
	}
}
