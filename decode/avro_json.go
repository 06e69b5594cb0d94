package decode

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/kafka2pg/kafka2pg/pgvalue"
)

// Avro values in jsonb columns: arrays, maps, unions other than [null, T],
// and records with nested: jsonb.

// maxJSONDepth bounds nesting in jsonb values, against hostile schemas.
const maxJSONDepth = 64

// avroJSON reads a value as JSON: records and maps are objects, arrays
// arrays, bytes and fixed base64, decimals exact numbers, times RFC 3339,
// and a union other than [null, T] the Avro JSON encoding {"type": value}.
func avroJSON(r *avro.Reader, s avro.Schema, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	s = deref(s)
	if r.Error != nil {
		return nil, r.Error
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		obj := make(map[string]any, len(t.Fields()))
		for _, f := range t.Fields() {
			v, err := avroJSON(r, f.Type(), depth+1)
			if err != nil {
				return nil, err
			}
			obj[f.Name()] = v
		}
		return obj, nil
	case *avro.ArraySchema:
		arr := []any{}
		for {
			n, _ := r.ReadBlockHeader()
			if n == 0 || r.Error != nil {
				return arr, r.Error
			}
			for range n {
				v, err := avroJSON(r, t.Items(), depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
		}
	case *avro.MapSchema:
		obj := map[string]any{}
		for {
			n, _ := r.ReadBlockHeader()
			if n == 0 || r.Error != nil {
				return obj, r.Error
			}
			for range n {
				k := r.ReadString()
				v, err := avroJSON(r, t.Values(), depth+1)
				if err != nil {
					return nil, err
				}
				obj[k] = v
			}
		}
	case *avro.UnionSchema:
		i := r.ReadLong()
		if i < 0 || i >= int64(len(t.Types())) {
			return nil, fmt.Errorf("union index %d is out of range", i)
		}
		branch := deref(t.Types()[i])
		if branch.Type() == avro.Null {
			return nil, nil
		}
		v, err := avroJSON(r, branch, depth+1)
		if err != nil {
			return nil, err
		}
		if _, _, isNullable := nullable(t); isNullable {
			return v, nil
		}
		name := string(branch.Type())
		if n, ok := branch.(avro.NamedSchema); ok {
			name = n.FullName()
		}
		return map[string]any{name: v}, nil
	}
	if s.Type() == avro.Null {
		return nil, nil
	}
	key := string(s.Type())
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		if d, ok := l.Logical().(*avro.DecimalLogicalSchema); ok {
			v, err := avroDecimal(r, s, d.Scale())
			if err != nil {
				return nil, err
			}
			return json.Number(v.(pgvalue.Numeric).String()), nil
		}
		key += "/" + string(l.Logical().Type())
	}
	sc, ok := avroTypes[key]
	if !ok {
		sc, ok = avroTypes[string(s.Type())]
	}
	if !ok {
		return nil, fmt.Errorf("type %s cannot be read", key)
	}
	v, err := sc.read(r, s)
	if err != nil {
		return nil, err
	}
	return jsonScalar(v), nil
}

// jsonScalar renders a decoded scalar for a jsonb document.
func jsonScalar(v any) any {
	switch x := v.(type) {
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case pgvalue.Time:
		return x.String()
	case pgvalue.UUID:
		return x.String()
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Sprint(x)
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Sprint(x)
		}
	}
	return v
}
