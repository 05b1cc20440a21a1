//! Where the WASI preview 1 adapter keeps its state in a Go module.
//!
//! The adapter allocates its state and stack (a 64 KiB page each) on the
//! first WASI call, which Go's runtime makes while it starts. It cannot
//! take them from the module's `cabi_realloc`: that re-enters Go from an
//! import on the system stack (`runtime.badsystemstack`). Nor from
//! `memory.grow`: Go's `sbrk` assumes it alone grows memory (it records the
//! end of its heap, `blocMax`, as `bl + n` after each grow, not what
//! `memory.grow` returned), so the next heap growth hands out the
//! adapter's pages again and the Go heap overwrites the adapter's state.
//!
//! So the Go SDK reserves an arena in the module's static data, marked by
//! [`MARKER`] (`plugins/sdk-go/plugin/adapter_arena.go`), memory Go never
//! allocates from, and this module adds a `cabi_realloc_adapter` export (the
//! name wit-component gives the adapter in preference to `cabi_realloc`): a
//! bump allocator over that arena, written in plain Wasm, that traps when
//! the arena is exhausted.

use anyhow::{Context, bail};
use wasm_encoder::reencode::{Error as ReencodeError, Reencode, utils};
use wasm_encoder::{
    CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection, GlobalSection, GlobalType, Instruction, TypeSection, ValType,
};
use wasmparser::{DataKind, Operator, Parser, Payload};

/// The first bytes of the Go SDK's arena; the allocator hands out what follows.
pub const MARKER: &[u8] = b"operator-host wasi adapter arena v1\0";
/// The arena's size in the Go SDK, marker included: the adapter's state and stack with room for alignment.
pub const SIZE: u32 = 3 * 65536;
/// The export wit-component imports into adapters in preference to `cabi_realloc`.
const EXPORT: &str = "cabi_realloc_adapter";

/// What the module holds that the new function and global are numbered after.
#[derive(Debug, Default)]
struct Counts {
    types: u32,
    functions: u32,
    globals: u32,
    arena: Option<u32>,
}

/// `module` with `cabi_realloc_adapter` over the Go SDK's arena, or `None`
/// when the module holds no arena (not built with the Go SDK).
pub fn add_adapter_realloc(module: &[u8]) -> anyhow::Result<Option<Vec<u8>>> {
    let counts = count(module)?;
    let Some(arena) = counts.arena else { return Ok(None) };
    let start = arena + u32::try_from(MARKER.len()).unwrap_or(u32::MAX);
    let mut adder = Adder { counts, start, end: arena + SIZE };
    let mut out = wasm_encoder::Module::new();
    adder.parse_core_module(&mut out, Parser::new(0), module).map_err(|e| anyhow::anyhow!("rewrite the module: {e}"))?;
    Ok(Some(out.finish()))
}

fn count(module: &[u8]) -> anyhow::Result<Counts> {
    let mut counts = Counts::default();
    for payload in Parser::new(0).parse_all(module) {
        match payload.context("read the core module")? {
            Payload::TypeSection(s) => counts.types += s.count(),
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    match import?.ty {
                        wasmparser::TypeRef::Func(_) => counts.functions += 1,
                        wasmparser::TypeRef::Global(_) => counts.globals += 1,
                        _ => {}
                    }
                }
            }
            Payload::FunctionSection(s) => counts.functions += s.count(),
            Payload::GlobalSection(s) => counts.globals += s.count(),
            Payload::ExportSection(s) => {
                for export in s {
                    if export?.name == EXPORT {
                        bail!("the module already exports {EXPORT}");
                    }
                }
            }
            Payload::DataSection(s) => {
                for data in s {
                    let data = data?;
                    let DataKind::Active { offset_expr, .. } = data.kind else { continue };
                    let Some(at) = data.data.windows(MARKER.len()).position(|w| w == MARKER) else { continue };
                    let Some(Ok(Operator::I32Const { value })) = offset_expr.get_operators_reader().into_iter().next() else { continue };
                    let address = u32::try_from(value).context("a data segment below address 0")? + u32::try_from(at)?;
                    if counts.arena.replace(address).is_some() {
                        bail!("two adapter arenas in the module");
                    }
                }
            }
            _ => {}
        }
    }
    Ok(counts)
}

/// A round trip of the module that appends the allocator's type, function,
/// cursor global, export and body at the end of each section, so nothing
/// already there is renumbered.
struct Adder {
    counts: Counts,
    start: u32,
    end: u32,
}

impl Reencode for Adder {
    type Error = std::convert::Infallible;

    fn parse_type_section(&mut self, types: &mut TypeSection, section: wasmparser::TypeSectionReader<'_>) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_type_section(self, types, section)?;
        types.ty().function([ValType::I32; 4], [ValType::I32]);
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        functions: &mut FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_function_section(self, functions, section)?;
        functions.function(self.counts.types);
        Ok(())
    }

    fn parse_global_section(
        &mut self,
        globals: &mut GlobalSection,
        section: wasmparser::GlobalSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_global_section(self, globals, section)?;
        globals.global(GlobalType { val_type: ValType::I32, mutable: true, shared: false }, &ConstExpr::i32_const(self.start.cast_signed()));
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_export_section(self, exports, section)?;
        exports.export(EXPORT, ExportKind::Func, self.counts.functions);
        Ok(())
    }

    fn parse_code_section(&mut self, code: &mut CodeSection, section: wasmparser::CodeSectionReader<'_>) -> Result<(), ReencodeError<Self::Error>> {
        utils::parse_code_section(self, code, section)?;
        code.function(&bump_allocator(self.counts.globals, self.end));
        Ok(())
    }
}

/// `cabi_realloc(old_ptr, old_len, align, new_len) -> ptr` for fresh
/// allocations only (the adapter never reallocates): the cursor rounded up
/// to `align`, moved by `new_len`; a trap past `end`.
fn bump_allocator(cursor: u32, end: u32) -> Function {
    let mut f = Function::new([]);
    let (old_ptr, old_len, align, new_len) = (0, 1, 2, 3);
    for i in [
        Instruction::LocalGet(old_ptr),
        Instruction::If(wasm_encoder::BlockType::Empty),
        Instruction::Unreachable,
        Instruction::End,
        // old_ptr := (cursor + align - 1) & -align
        Instruction::GlobalGet(cursor),
        Instruction::LocalGet(align),
        Instruction::I32Add,
        Instruction::I32Const(1),
        Instruction::I32Sub,
        Instruction::I32Const(0),
        Instruction::LocalGet(align),
        Instruction::I32Sub,
        Instruction::I32And,
        Instruction::LocalSet(old_ptr),
        // old_len := old_ptr + new_len, the new cursor
        Instruction::LocalGet(old_ptr),
        Instruction::LocalGet(new_len),
        Instruction::I32Add,
        Instruction::LocalTee(old_len),
        Instruction::I32Const(end.cast_signed()),
        Instruction::I32GtU,
        Instruction::If(wasm_encoder::BlockType::Empty),
        Instruction::Unreachable,
        Instruction::End,
        Instruction::LocalGet(old_len),
        Instruction::GlobalSet(cursor),
        Instruction::LocalGet(old_ptr),
        Instruction::End,
    ] {
        f.instruction(&i);
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_without_the_go_sdks_arena_is_left_alone() {
        // (module (memory (export "memory") 1))
        let module = [0, b'a', b's', b'm', 1, 0, 0, 0, 5, 3, 1, 0, 1, 7, 10, 1, 6, b'm', b'e', b'm', b'o', b'r', b'y', 2, 0];
        assert!(add_adapter_realloc(&module).unwrap().is_none());
    }
}
