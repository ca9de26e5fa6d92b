package sft

// TokenRow is the table row of an example (input_ids, loss_mask) with the given extra
// columns, for data.WriteTable.
func TokenRow(ex *Example, extra map[string]any) map[string]any {
	ids := make([]any, len(ex.IDs))
	mask := make([]any, len(ex.IDs))
	for i, id := range ex.IDs {
		ids[i] = int64(id)
		if ex.Mask[i] {
			mask[i] = int64(1)
		} else {
			mask[i] = int64(0)
		}
	}
	row := map[string]any{ColInputIDs: ids, ColLossMask: mask}
	for k, v := range extra {
		row[k] = v
	}
	return row
}
