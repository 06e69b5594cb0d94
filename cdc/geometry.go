package cdc

import (
	"encoding/binary"
	"math"

	"github.com/kafka2pg/kafka2pg/decode"
)

// Geometries (io.debezium.data.geometry.Geometry, Geography and Point)
// become bytea holding the geometry's Well-Known Binary, as PostGIS' EWKB
// when the event carries an SRID: the SRID flag (0x20000000) set in the
// geometry type and the SRID after it. PostGIS reads that form directly
// (ST_GeomFromEWKB(col), or col::geometry), and without PostGIS the bytes
// are still the standard WKB a GIS library reads; jsonb would have kept
// neither form usable. Debezium's extensions map (the native Postgres
// type of a box, lseg, path or polygon) is not kept.

const ewkbSRIDFlag = 0x20000000

// decodeGeometry reads {"wkb": base64, "srid": n, ...}.
func decodeGeometry(r *reader, n *node) (any, *convError) {
	g, cerr := readGeometryStruct(r, n)
	if cerr != nil || r.err != nil {
		return nil, cerr
	}
	if g.wkb == nil {
		return nil, convErrorf(decode.KindInvalidValue, "the %s has no wkb", n.s.Name)
	}
	return ewkb(g.wkb, g.srid, g.hasSRID)
}

// decodePoint reads {"x": .., "y": .., "wkb": base64 or null, "srid": n};
// without wkb the point's WKB is made from x and y.
func decodePoint(r *reader, n *node) (any, *convError) {
	g, cerr := readGeometryStruct(r, n)
	if cerr != nil || r.err != nil {
		return nil, cerr
	}
	wkb := g.wkb
	if wkb == nil {
		if !g.hasXY {
			return nil, convErrorf(decode.KindInvalidValue, "the point has neither wkb nor x and y")
		}
		wkb = make([]byte, 21)
		wkb[0] = 1 // little endian
		binary.LittleEndian.PutUint32(wkb[1:], 1)
		binary.LittleEndian.PutUint64(wkb[5:], math.Float64bits(g.x))
		binary.LittleEndian.PutUint64(wkb[13:], math.Float64bits(g.y))
	}
	return ewkb(wkb, g.srid, g.hasSRID)
}

type geometryStruct struct {
	wkb     []byte
	srid    int32
	hasSRID bool
	x, y    float64
	hasXY   bool
}

func readGeometryStruct(r *reader, n *node) (geometryStruct, *convError) {
	var g geometryStruct
	if r.peek() != '{' {
		return g, mismatch(n, what(r))
	}
	var hasX, hasY bool
	r.object()
	for first := true; ; first = false {
		key, ok := r.member(first)
		if !ok {
			break
		}
		if r.null() {
			continue
		}
		var cerr *convError
		switch string(key) {
		case "wkb":
			g.wkb, cerr = readBase64(r, n)
		case "srid":
			var v int64
			v, cerr = readInt(r, n, 32)
			g.srid, g.hasSRID = int32(v), true
		case "x":
			g.x, cerr = readFloat(r, n, 64)
			hasX = true
		case "y":
			g.y, cerr = readFloat(r, n, 64)
			hasY = true
		default:
			r.skip()
		}
		if cerr != nil {
			return g, cerr
		}
	}
	g.hasXY = hasX && hasY
	return g, nil
}

// ewkb adds the SRID to a WKB geometry, unless it has one already.
func ewkb(wkb []byte, srid int32, hasSRID bool) (any, *convError) {
	if len(wkb) < 5 || wkb[0] > 1 {
		return nil, convErrorf(decode.KindInvalidValue, "the wkb is not Well-Known Binary: it needs a byte-order byte (0 or 1) and a geometry type")
	}
	if !hasSRID {
		return wkb, nil
	}
	var order interface {
		binary.ByteOrder
		binary.AppendByteOrder
	} = binary.LittleEndian
	if wkb[0] == 0 {
		order = binary.BigEndian
	}
	typ := order.Uint32(wkb[1:5])
	if typ&ewkbSRIDFlag != 0 {
		return wkb, nil
	}
	out := make([]byte, 0, len(wkb)+4)
	out = append(out, wkb[0])
	out = order.AppendUint32(out, typ|ewkbSRIDFlag)
	out = order.AppendUint32(out, uint32(srid))
	return append(out, wkb[5:]...), nil
}
