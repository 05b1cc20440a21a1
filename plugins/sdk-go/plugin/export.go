//go:build wasip1

package plugin

// The module's side of the contract: the canonical-ABI exports and the log
// import `host componentize` wires into a component (wit/v0.3/plugin.wit, world
// `plugin`). Every export lifts its arguments (abi.go), calls the
// registered Plugin and answers the address of its lowered result.

import "unsafe"

// linear is the module's own linear memory. Memory handed to the host
// (cabi_realloc's and lowered results) is kept reachable in `pinned` so
// the garbage collector leaves it alone until the next export call begins:
// by then the host has read the previous answer (the host makes a fresh
// instance for each call anyway).
type linear struct{}

var pinned [][]uint64

func (linear) view(addr, n uint32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(addr))), n)
}

func (linear) alloc(size, align uint32) uint32 {
	if align > 8 {
		panic("cabi_realloc: alignment above 8")
	}
	// A []uint64 is 8-aligned, enough for every alignment the contract needs.
	block := make([]uint64, (size+7)/8+1)
	pinned = append(pinned, block)
	return uint32(uintptr(unsafe.Pointer(&block[0])))
}

// begin drops what the previous call handed over.
func begin() linear {
	pinned = pinned[:0]
	return linear{}
}

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	m := linear{}
	addr := m.alloc(newSize, align)
	if old != 0 && oldSize > 0 {
		copy(m.view(addr, newSize), m.view(old, min(oldSize, newSize)))
	}
	return addr
}

//go:wasmexport operator:plugin/controller@0.3.0#manifest
func exportManifest() uint32 {
	m := begin()
	man := current().PluginManifest()
	return lowerManifest(m, &man)
}

//go:wasmexport operator:plugin/controller@0.3.0#reconcile
func exportReconcile(parentPtr, parentLen, childrenPtr, childrenLen, relatedPtr, relatedLen uint32, now int64) uint32 {
	m := begin()
	steps, err := current().ReconcileJSON(liftString(m, parentPtr, parentLen), liftStrings(m, childrenPtr, childrenLen), liftStrings(m, relatedPtr, relatedLen), now)
	return lowerActions(m, steps, err)
}

//go:wasmexport operator:plugin/desired@0.3.0#reconcile
func exportDesiredReconcile(parentPtr, parentLen, childrenPtr, childrenLen, relatedPtr, relatedLen uint32, now int64) uint32 {
	m := begin()
	steps, err := current().ReconcileJSON(liftString(m, parentPtr, parentLen), liftStrings(m, childrenPtr, childrenLen), liftStrings(m, relatedPtr, relatedLen), now)
	return lowerSteps(m, steps, err)
}

//go:wasmexport operator:plugin/controller@0.3.0#validate
func exportValidate(objectPtr, objectLen, oldDisc, oldPtr, oldLen uint32) uint32 {
	m := begin()
	errs := current().ValidateJSON(liftString(m, objectPtr, objectLen), liftOptionString(m, oldDisc, oldPtr, oldLen))
	return lowerFieldErrors(m, errs)
}

//go:wasmexport operator:plugin/controller@0.3.0#default
func exportDefault(objectPtr, objectLen uint32) uint32 {
	m := begin()
	object, err := current().DefaultJSON(liftString(m, objectPtr, objectLen))
	return lowerDefaulted(m, object, err)
}

//go:wasmimport operator:plugin/log@0.3.0 log
func hostLog(level uint32, ptr unsafe.Pointer, n uint32)

func writeLog(level Level, message string) {
	if message == "" {
		hostLog(uint32(level), nil, 0)
		return
	}
	hostLog(uint32(level), unsafe.Pointer(unsafe.StringData(message)), uint32(len(message)))
}
