package integration_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// maxItems bounds an order's items: order version v has v % (maxItems+1).
const maxItems = 50

// startOrderProducer produces orders over keys ids, in batches of batch
// records with pause between them, until limit or stop: each an upsert of
// {"version": v, "items": [...]} with v % (maxItems+1) items, sku
// "v<v>-<i>" and qty i, or (15%) a tombstone of the order. It keeps every
// acknowledged record as an accountOp (id, version, tombstone, position),
// which foldAccounts folds.
func (s *scenario) startOrderProducer(t testing.TB, keys, batch int, pause time.Duration, limit int) *accountProducer {
	t.Helper()
	return s.startKeyedProducer(t, keys, batch, pause, limit, func(op *accountOp) []byte {
		items := make([]string, op.version%(maxItems+1))
		for j := range items {
			items[j] = fmt.Sprintf(`{"sku":"v%d-%d","qty":%d}`, op.version, j, j)
		}
		return fmt.Appendf(nil, `{"version":%d,"items":[%s]}`, op.version, strings.Join(items, ","))
	})
}

// TestChildrenUnderACrashLoopAreEachOrdersItemsExactlyOnce SIGKILLs the
// bridge over and over while orders with 0-50 items are upserted and
// deleted, then lets a last run catch up, and checks by SQL that the
// orders are the fold of the stream and that each live order has exactly
// the items of its last record, once each, and a deleted one none: a
// batch whose parent rows committed without their children, or children
// written twice across a redelivery, fails it.
func TestChildrenUnderACrashLoopAreEachOrdersItemsExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		partitions = 3
		keys       = 200
		kills      = 5
	)
	s := newScenario(t, partitions)
	items := s.table + "_items"
	config := writeSinksConfig(t, fmt.Sprintf(`  - topic: %s
    table: %s
    mode: upsert
    key: [id]
    delete_on_tombstone: true
    columns:
      - {name: id, from: key, path: id, type: bigint}
      - {name: version, path: version, type: bigint}
    children:
      - path: items
        table: %s
        index_column: item_index
        columns:
          - {name: sku, type: text, not_null: true}
          - {name: qty, type: integer}
`, s.topic, s.table, items))
	flags := append([]string{"--batch-max-rows", "100", "--batch-max-wait", "20ms"}, fastGroupFlags...)
	prod := s.startOrderProducer(t, keys, 20, 30*time.Millisecond, 4_000)

	ops, want, tombstones, ends := s.crashLoopFold(t, "children", kills, keys, prod, config, flags)
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)

	// The orders are the fold: each live id with the version of its last
	// record.
	var got []string
	var wantIDs []string
	rows, err := s.db.Query(t.Context(), fmt.Sprintf(`SELECT id, version FROM %s ORDER BY id`, tableName(s.table)))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, version int64
		if err := rows.Scan(&id, &version); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d@%d", id, version))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range keys {
		if op, ok := want[id]; ok {
			wantIDs = append(wantIDs, fmt.Sprintf("%d@%d", id, op.version))
		}
	}
	if strings.Join(got, " ") != strings.Join(wantIDs, " ") {
		t.Fatalf("orders differ from the fold of the stream:\n got %v\nwant %v", got, wantIDs)
	}

	// Each order's children are the items of its version, once each; no
	// child belongs to a missing order or to an older version.
	var wrong, count, wantCount int64
	q := fmt.Sprintf(`SELECT
		(SELECT count(*) FROM %[2]s i LEFT JOIN %[1]s o USING (id)
		  WHERE o.id IS NULL OR i.sku <> format('v%%s-%%s', o.version, i.item_index) OR i.qty <> i.item_index
		     OR i.item_index >= o.version %% %[3]d),
		(SELECT count(*) FROM %[2]s),
		(SELECT coalesce(sum(version %% %[3]d), 0) FROM %[1]s)`, tableName(s.table), tableName(items), maxItems+1)
	if err := s.db.QueryRow(t.Context(), q).Scan(&wrong, &count, &wantCount); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if wrong != 0 || count != wantCount {
		t.Errorf("children: %d rows, want %d (the items of each order's last version); %d of them not an item of their order's version", count, wantCount, wrong)
	}
	if n := s.deadLetterCount(t); n != 0 {
		t.Errorf("%d dead letters, want none: every order is good", n)
	}
	t.Logf("%d records (%d tombstones) over %d keys fold to %d orders with %d children", len(ops), tombstones, keys, len(want), count)
}
