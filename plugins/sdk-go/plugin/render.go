package plugin

import "encoding/json"

// HostJSON is a reconcile's answer as `host reconcile --output json`
// prints it (and as fixtures' expected.json hold it): the steps as
// one-key objects, or {"error": ...}.
func HostJSON(steps []Step, err *ReconcileError) any {
	if err != nil {
		return map[string]any{"error": err}
	}
	out := make([]any, 0, len(steps))
	for _, s := range steps {
		if s.Apply != "" {
			out = append(out, map[string]any{"apply": raw(s.Apply)})
			continue
		}
		a := s.Act
		switch a.Kind {
		case ActCreate:
			out = append(out, map[string]any{"create": raw(a.Text)})
		case ActReplace:
			out = append(out, map[string]any{"replace": raw(a.Text)})
		case ActPatch:
			out = append(out, map[string]any{"patch": map[string]any{"target": a.Target, "patch": raw(a.Text)}})
		case ActDelete:
			out = append(out, map[string]any{"delete": map[string]any{"target": a.Target, "propagation": a.Propagation.String()}})
		case ActSetStatus:
			out = append(out, map[string]any{"setStatus": raw(a.Text)})
		case ActEvent:
			out = append(out, map[string]any{"event": map[string]any{"type": a.EventType.String(), "reason": a.Reason, "message": a.Message}})
		case ActRequeueAfter:
			out = append(out, map[string]any{"requeueAfterMs": a.Millis})
		case ActFinalized:
			out = append(out, map[string]any{"finalized": map[string]any{}})
		}
	}
	return out
}

// raw is JSON text as a value, or the text itself when it is not JSON.
func raw(text string) any {
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		return text
	}
	return v
}
