package plugin

// The canonical ABI of the contract, written once: how each WIT value the
// plugin receives is lifted from linear memory and how each answer is
// lowered into it (wasm32: pointers and lengths are u32, little endian;
// every layout below is the Component Model's, computed from the WIT and
// commented where it is not obvious). The functions take a memory so the
// same code runs against the module's own linear memory (export.go) and
// against a plain byte slice in native tests (abi_test.go).

import "encoding/binary"

// memory is linear memory as the canonical ABI sees it.
type memory interface {
	// view is n bytes at addr, writable.
	view(addr, n uint32) []byte
	// alloc reserves size bytes aligned to align and answers their address.
	alloc(size, align uint32) uint32
}

var le = binary.LittleEndian

// Sizes of the records and variants the answers hold.
const (
	stringSize      = 8  // (ptr, len)
	gvkSize         = 24 // three strings
	relatedKindSize = 40 // gvk @0, attachment (u8 @24, payload @28), bool @36
	manifestSize    = 76 // see lowerManifest
	resultSize      = 24 // u8 @0, payload @4 (list: 8, reconcile-error: 20)
	actionSize      = 48 // u8 @0, payload @8 (largest: merge-patch, 40); u64 case aligns it to 8
	stepSize        = 56 // u8 @0, action @8
	fieldErrorSize  = 32 // field @0, kind u8 @8, option<string> (u8 @12, string @16), detail @24
)

func liftString(m memory, ptr, n uint32) string {
	if n == 0 {
		return ""
	}
	return string(m.view(ptr, n))
}

func liftStrings(m memory, ptr, n uint32) []string {
	out := make([]string, n)
	for i := range out {
		at := m.view(ptr+uint32(i)*stringSize, stringSize)
		out[i] = liftString(m, le.Uint32(at[0:]), le.Uint32(at[4:]))
	}
	return out
}

func liftOptionString(m memory, disc, ptr, n uint32) *string {
	if disc == 0 {
		return nil
	}
	s := liftString(m, ptr, n)
	return &s
}

// area is a lowered value under construction at addr.
type area struct {
	m    memory
	addr uint32
	b    []byte
}

func newArea(m memory, size, align uint32) area {
	addr := m.alloc(size, align)
	return area{m, addr, m.view(addr, size)}
}

func (a area) at(off uint32) area       { return area{a.m, a.addr + off, a.b[off:]} }
func (a area) u8(off uint32, v uint8)   { a.b[off] = v }
func (a area) u32(off uint32, v uint32) { le.PutUint32(a.b[off:], v) }
func (a area) u64(off uint32, v uint64) { le.PutUint64(a.b[off:], v) }

func (a area) bool(off uint32, v bool) {
	if v {
		a.b[off] = 1
	} else {
		a.b[off] = 0
	}
}

func (a area) string(off uint32, s string) {
	var ptr uint32
	if len(s) > 0 {
		ptr = a.m.alloc(uint32(len(s)), 1)
		copy(a.m.view(ptr, uint32(len(s))), s)
	}
	a.u32(off, ptr)
	a.u32(off+4, uint32(len(s)))
}

func (a area) optionString(off uint32, s *string) {
	if s == nil {
		a.u8(off, 0)
		return
	}
	a.u8(off, 1)
	a.string(off+4, *s)
}

// list lowers n elements of elemSize bytes (aligned to align) with put and
// stores the list's (ptr, len) at off.
func (a area) list(off uint32, n int, elemSize, align uint32, put func(i int, elem area)) {
	var ptr uint32
	if n > 0 {
		items := newArea(a.m, uint32(n)*elemSize, align)
		for i := 0; i < n; i++ {
			put(i, items.at(uint32(i)*elemSize))
		}
		ptr = items.addr
	}
	a.u32(off, ptr)
	a.u32(off+4, uint32(n))
}

func (a area) gvk(off uint32, g GroupVersionKind) {
	a.string(off, g.Group)
	a.string(off+8, g.Version)
	a.string(off+16, g.Kind)
}

// lowerManifest: name @0, version @8, parent @16, children @40, related
// @48, crds @56, finalizer @64 (u8 @64, string @68).
func lowerManifest(m memory, man *Manifest) uint32 {
	a := newArea(m, manifestSize, 4)
	a.string(0, man.Name)
	a.string(8, man.Version)
	a.gvk(16, man.Parent)
	a.list(40, len(man.Children), gvkSize, 4, func(i int, e area) { e.gvk(0, man.Children[i]) })
	a.list(48, len(man.Related), relatedKindSize, 4, func(i int, e area) {
		r := man.Related[i]
		e.gvk(0, r.Kind)
		e.u8(24, uint8(r.Attach.Kind))
		if r.Attach.Kind == NamesFrom {
			e.list(28, len(r.Attach.Paths), stringSize, 4, func(j int, s area) { s.string(0, r.Attach.Paths[j]) })
		} else {
			e.string(28, r.Attach.Text)
		}
		e.bool(36, r.ClusterScoped)
	})
	a.list(56, len(man.CRDs), stringSize, 4, func(i int, e area) { e.string(0, man.CRDs[i]) })
	a.optionString(64, man.Finalizer)
	return a.addr
}

func (a area) reconcileError(off uint32, e *ReconcileError) {
	a.string(off, e.Reason)
	a.string(off+8, e.Message)
	a.bool(off+16, e.Retryable)
}

func (a area) objectRef(off uint32, r ObjectRef) {
	a.string(off, r.APIVersion)
	a.string(off+8, r.Kind)
	a.string(off+16, r.Namespace)
	a.string(off+24, r.Name)
}

// action: the case @0, its payload @8.
func (a area) action(act *Action) {
	a.u8(0, uint8(act.Kind))
	p := a.at(8)
	switch act.Kind {
	case ActCreate, ActReplace, ActSetStatus:
		p.string(0, act.Text)
	case ActPatch: // merge-patch: target @0, patch @32
		p.objectRef(0, act.Target)
		p.string(32, act.Text)
	case ActDelete: // deletion: target @0, propagation u8 @32
		p.objectRef(0, act.Target)
		p.u8(32, uint8(act.Propagation))
	case ActEvent: // event: type u8 @0, reason @4, message @12
		p.u8(0, uint8(act.EventType))
		p.string(4, act.Reason)
		p.string(12, act.Message)
	case ActRequeueAfter:
		p.u64(0, act.Millis)
	case ActFinalized:
	}
}

// lowerSteps lowers `result<list<step>, reconcile-error>` (desired.reconcile).
func lowerSteps(m memory, steps []Step, err *ReconcileError) uint32 {
	a := newArea(m, resultSize, 4)
	if err != nil {
		a.u8(0, 1)
		a.reconcileError(4, err)
		return a.addr
	}
	a.u8(0, 0)
	a.list(4, len(steps), stepSize, 8, func(i int, e area) {
		if steps[i].Apply != "" {
			e.u8(0, 1)
			e.string(8, steps[i].Apply)
		} else {
			e.u8(0, 0)
			e.at(8).action(&steps[i].Act)
		}
	})
	return a.addr
}

// lowerActions lowers `result<list<action>, reconcile-error>`
// (controller.reconcile): a step that applies a child has no 0.2 form, so
// it is answered as an error naming the export to call instead.
func lowerActions(m memory, steps []Step, err *ReconcileError) uint32 {
	if err == nil {
		for _, s := range steps {
			if s.Apply != "" {
				err = &ReconcileError{Reason: "ApplyNeedsDesired", Message: "this plugin applies children: call desired.reconcile (contract 0.3)"}
				break
			}
		}
	}
	a := newArea(m, resultSize, 4)
	if err != nil {
		a.u8(0, 1)
		a.reconcileError(4, err)
		return a.addr
	}
	a.u8(0, 0)
	a.list(4, len(steps), actionSize, 8, func(i int, e area) { e.action(&steps[i].Act) })
	return a.addr
}

// lowerFieldErrors lowers `list<field-error>` into a return area (ptr, len).
func lowerFieldErrors(m memory, errs []FieldError) uint32 {
	a := newArea(m, 8, 4)
	a.list(0, len(errs), fieldErrorSize, 4, func(i int, e area) {
		f := errs[i]
		e.string(0, f.Field)
		e.u8(8, uint8(f.Kind))
		e.optionString(12, f.Value)
		e.string(24, f.Detail)
	})
	return a.addr
}

// lowerDefaulted lowers `result<string, reconcile-error>`.
func lowerDefaulted(m memory, object string, err *ReconcileError) uint32 {
	a := newArea(m, resultSize, 4)
	if err != nil {
		a.u8(0, 1)
		a.reconcileError(4, err)
	} else {
		a.u8(0, 0)
		a.string(4, object)
	}
	return a.addr
}
