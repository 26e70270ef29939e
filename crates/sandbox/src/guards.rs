//! Native guards for the operations that can allocate without bound in a single step.
//!
//! The rewrite in `check.rs` turns `a * b` into `_weft_mul(a, b)`, `s.ljust` into
//! `_weft_attr_ljust(s)` and so on. Each guard predicts the size of the result from its
//! operands and raises `MemoryError` when it would exceed the run's budget; otherwise it
//! performs the real operation. A single Rust-level allocation cannot be interrupted by the
//! watchdog, so these checks are what keeps `[0] * 10**9` from reaching the allocator.

use std::cell::Cell;

use malachite_bigint::BigInt;
use num_traits::{Signed, ToPrimitive};
use rustpython_vm::{
    AsObject, PyObject, PyObjectRef, PyResult, VirtualMachine,
    builtins::{PyBaseExceptionRef, PyBytes, PyDict, PyInt, PyList, PyStr, PyTuple},
    function::{FuncArgs, PyMethodDef, PyMethodFlags},
};

use crate::check::longest_digit_run;

thread_local! {
    /// The running job's memory budget, in bytes.
    static BUDGET: Cell<usize> = const { Cell::new(64 * 1024 * 1024) };
}

/// The largest integer a guarded operation may produce, in bits (about 300,000 decimal
/// digits): far beyond what data transformations need, small enough that printing it stays
/// fast.
pub(crate) const MAX_INT_BITS: u64 = 1 << 20;

/// Widths and precisions in `%` formats and computed format specs are limited to 4 digits.
const MAX_WIDTH: u64 = 9999;

pub(crate) fn set_budget(bytes: usize) {
    BUDGET.with(|b| b.set(bytes.max(1)));
}

fn budget() -> usize {
    BUDGET.with(Cell::get)
}

fn too_big(vm: &VirtualMachine, what: &str) -> PyBaseExceptionRef {
    vm.new_memory_error(format!(
        "{what} would exceed the sandbox's memory budget of {} bytes",
        budget()
    ))
}

fn as_int(obj: &PyObject) -> Option<&BigInt> {
    obj.downcast_ref::<PyInt>().map(|i| i.as_bigint())
}

fn to_usize_saturating(n: &BigInt) -> usize {
    if n.is_negative() {
        0
    } else {
        n.to_usize().unwrap_or(usize::MAX)
    }
}

/// Bytes of a str or bytes object.
fn text_len(obj: &PyObject) -> Option<usize> {
    if let Some(s) = obj.downcast_ref::<PyStr>() {
        Some(s.byte_len())
    } else {
        obj.downcast_ref::<PyBytes>().map(|b| b.as_bytes().len())
    }
}

/// A rough size of one element: its text, or 8 bytes per item of a container.
fn shallow_size(obj: &PyObject) -> usize {
    if let Some(len) = text_len(obj) {
        len
    } else if let Some(list) = obj.downcast_ref::<PyList>() {
        8 * list.borrow_vec().len()
    } else if let Some(tuple) = obj.downcast_ref::<PyTuple>() {
        8 * tuple.len()
    } else if let Some(dict) = obj.downcast_ref::<PyDict>() {
        16 * dict.__len__()
    } else {
        0
    }
}

/// The weight of one copy of a sequence that is about to be repeated: its bytes for text;
/// for a list or tuple, 8 bytes per item plus the size of each item (so that repeating a
/// reference to a large string many times, which would print as a huge text, is refused).
fn repeat_weight(obj: &PyObject) -> Option<usize> {
    if let Some(len) = text_len(obj) {
        Some(len)
    } else if let Some(list) = obj.downcast_ref::<PyList>() {
        let items = list.borrow_vec();
        Some(items.iter().fold(8 * items.len(), |acc, item| {
            acc.saturating_add(shallow_size(item))
        }))
    } else {
        obj.downcast_ref::<PyTuple>().map(|tuple| {
            tuple.iter().fold(8 * tuple.len(), |acc, item| {
                acc.saturating_add(shallow_size(item))
            })
        })
    }
}

fn check_repeat(seq: &PyObject, times: &BigInt, vm: &VirtualMachine) -> PyResult<()> {
    let Some(weight) = repeat_weight(seq) else {
        return Ok(());
    };
    let times = to_usize_saturating(times);
    if times > 1 && weight.max(1).saturating_mul(times) > budget() {
        return Err(too_big(vm, "the repeated sequence"));
    }
    Ok(())
}

fn check_int_bits(bits: u64, vm: &VirtualMachine) -> PyResult<()> {
    if bits > MAX_INT_BITS {
        return Err(vm.new_memory_error(format!(
            "the integer would have more than {MAX_INT_BITS} bits"
        )));
    }
    Ok(())
}

fn check_mul(a: &PyObject, b: &PyObject, vm: &VirtualMachine) -> PyResult<()> {
    match (as_int(a), as_int(b)) {
        (Some(x), Some(y)) => check_int_bits(x.bits() + y.bits(), vm),
        (None, Some(times)) => check_repeat(a, times, vm),
        (Some(times), None) => check_repeat(b, times, vm),
        (None, None) => Ok(()),
    }
}

fn check_pow(a: &PyObject, b: &PyObject, vm: &VirtualMachine) -> PyResult<()> {
    let (Some(base), Some(exponent)) = (as_int(a), as_int(b)) else {
        return Ok(());
    };
    let base_bits = base.bits();
    if exponent.is_negative() || base_bits <= 1 {
        // A float, or 0, 1, -1 to any power.
        return Ok(());
    }
    let exponent = exponent.to_u64().unwrap_or(u64::MAX);
    check_int_bits(base_bits.saturating_mul(exponent), vm)
}

fn check_lshift(a: &PyObject, b: &PyObject, vm: &VirtualMachine) -> PyResult<()> {
    let (Some(value), Some(shift)) = (as_int(a), as_int(b)) else {
        return Ok(());
    };
    if value.bits() == 0 || shift.is_negative() {
        return Ok(());
    }
    let shift = shift.to_u64().unwrap_or(u64::MAX);
    check_int_bits(value.bits().saturating_add(shift), vm)
}

/// `text % args`: widths and precisions in the format are limited, written out or given by
/// `*`.
fn check_percent(a: &PyObject, b: &PyObject, vm: &VirtualMachine) -> PyResult<()> {
    let format: &[u8] = if let Some(s) = a.downcast_ref::<PyStr>() {
        s.as_wtf8().as_bytes()
    } else if let Some(bytes) = a.downcast_ref::<PyBytes>() {
        bytes.as_bytes()
    } else {
        return Ok(());
    };
    let (widths_ok, has_star) = scan_percent_format(format);
    if !widths_ok {
        return Err(too_big(vm, "a `%` format width or precision above 9999"));
    }
    if has_star {
        let big = |obj: &PyObject| as_int(obj).is_some_and(|n| n.abs() > BigInt::from(MAX_WIDTH));
        let any_big = match b.downcast_ref::<PyTuple>() {
            Some(tuple) => tuple.iter().any(|item| big(item)),
            None => big(b),
        };
        if any_big {
            return Err(too_big(vm, "a `%` format width or precision above 9999"));
        }
    }
    Ok(())
}

/// Scans a printf-style format: (every width and precision has at most 4 digits, a `*`
/// is used).
fn scan_percent_format(format: &[u8]) -> (bool, bool) {
    let mut ok = true;
    let mut star = false;
    let mut i = 0;
    while i < format.len() {
        if format[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if format.get(i) == Some(&b'%') {
            i += 1;
            continue;
        }
        if format.get(i) == Some(&b'(') {
            let mut depth = 0usize;
            while i < format.len() {
                match format[i] {
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        while i < format.len() && b"-+ #0".contains(&format[i]) {
            i += 1;
        }
        for part in 0..2 {
            if part == 1 {
                if format.get(i) != Some(&b'.') {
                    break;
                }
                i += 1;
            }
            if format.get(i) == Some(&b'*') {
                star = true;
                i += 1;
            } else {
                let start = i;
                while i < format.len() && format[i].is_ascii_digit() {
                    i += 1;
                }
                if i - start > 4 {
                    ok = false;
                }
            }
        }
    }
    (ok, star)
}

fn guard_mul(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_mul(&a, &b, vm)?;
    vm._mul(&a, &b)
}

fn guard_imul(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_mul(&a, &b, vm)?;
    vm._imul(&a, &b)
}

fn guard_pow(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_pow(&a, &b, vm)?;
    vm._pow(&a, &b, vm.ctx.none.as_object())
}

fn guard_ipow(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_pow(&a, &b, vm)?;
    vm._ipow(&a, &b, vm.ctx.none.as_object())
}

fn guard_lshift(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_lshift(&a, &b, vm)?;
    vm._lshift(&a, &b)
}

fn guard_ilshift(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_lshift(&a, &b, vm)?;
    vm._ilshift(&a, &b)
}

fn guard_mod(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_percent(&a, &b, vm)?;
    vm._mod(&a, &b)
}

fn guard_imod(a: PyObjectRef, b: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    check_percent(&a, &b, vm)?;
    vm._imod(&a, &b)
}

/// A computed part of an f-string format spec (`f'{x:{width}}'`).
fn guard_spec(value: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    let text = value.str(vm)?;
    if longest_digit_run(&text.to_string_lossy()) > 4 {
        return Err(too_big(vm, "a format width or precision above 9999"));
    }
    Ok(value)
}

/// A positional-or-keyword argument of a method call.
fn argument<'a>(args: &'a FuncArgs, position: usize, keyword: &str) -> Option<&'a PyObjectRef> {
    args.args.get(position).or_else(|| args.kwargs.get(keyword))
}

fn count_occurrences(haystack: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return haystack.len() + 1;
    }
    let mut count = 0;
    let mut i = 0;
    while i + needle.len() <= haystack.len() {
        if haystack[i..].starts_with(needle) {
            count += 1;
            i += needle.len();
        } else {
            i += 1;
        }
    }
    count
}

fn text_bytes(obj: &PyObject) -> Option<&[u8]> {
    if let Some(s) = obj.downcast_ref::<PyStr>() {
        Some(s.as_wtf8().as_bytes())
    } else {
        obj.downcast_ref::<PyBytes>().map(|b| b.as_bytes())
    }
}

/// Checks (and for `join`, prepares) the arguments of a guarded method call on `obj`.
fn check_method(
    name: &str,
    obj: &PyObject,
    args: &mut FuncArgs,
    vm: &VirtualMachine,
) -> PyResult<()> {
    let limit = budget();
    let len = text_len(obj).unwrap_or(0);
    // Characters may take up to 4 bytes.
    let char_bytes = if obj.downcast_ref::<PyStr>().is_some() {
        4
    } else {
        1
    };
    match name {
        "ljust" | "rjust" | "center" | "zfill" => {
            if let Some(width) = argument(args, 0, "width").and_then(|w| as_int(w))
                && to_usize_saturating(width).saturating_mul(char_bytes) > limit
            {
                return Err(too_big(vm, "the padded string"));
            }
        }
        "expandtabs" => {
            if let Some(size) = argument(args, 0, "tabsize").and_then(|w| as_int(w)) {
                let tabs = text_bytes(obj).map_or(0, |t| t.iter().filter(|&&c| c == b'\t').count());
                if tabs
                    .saturating_mul(to_usize_saturating(size))
                    .saturating_add(len)
                    > limit
                {
                    return Err(too_big(vm, "the expanded string"));
                }
            }
        }
        "replace" => {
            let (Some(old), Some(new)) = (
                argument(args, 0, "old").and_then(|o| text_bytes(o)),
                argument(args, 1, "new").and_then(|n| text_bytes(n)),
            ) else {
                return Ok(());
            };
            if new.len() <= old.len() {
                return Ok(());
            }
            let growth = new.len() - old.len();
            let mut occurrences = len / old.len().max(1) + 1;
            if let Some(count) = argument(args, 2, "count").and_then(|c| as_int(c))
                && !count.is_negative()
            {
                occurrences = occurrences.min(to_usize_saturating(count));
            }
            if occurrences.saturating_mul(growth).saturating_add(len) > limit {
                let exact = text_bytes(obj).map_or(0, |hay| count_occurrences(hay, old));
                if exact
                    .min(occurrences)
                    .saturating_mul(growth)
                    .saturating_add(len)
                    > limit
                {
                    return Err(too_big(vm, "the replaced string"));
                }
            }
        }
        "join" => {
            let Some(iterable) = args.args.first().cloned() else {
                return Ok(());
            };
            let items = vm.extract_elements_with(&iterable, Ok)?;
            let total = items.iter().fold(
                len.saturating_mul(items.len().saturating_sub(1)),
                |acc, item| acc.saturating_add(text_len(item).unwrap_or(0)),
            );
            if total > limit {
                return Err(too_big(vm, "the joined string"));
            }
            args.args[0] = vm.ctx.new_list(items).into();
        }
        "translate" => {
            let Some(table) = argument(args, 0, "table") else {
                return Ok(());
            };
            if obj.downcast_ref::<PyStr>().is_none() {
                return Ok(());
            }
            let values: Vec<PyObjectRef> = if let Some(dict) = table.downcast_ref::<PyDict>() {
                dict.values_vec()
            } else if let Some(list) = table.downcast_ref::<PyList>() {
                list.borrow_vec().to_vec()
            } else if let Some(tuple) = table.downcast_ref::<PyTuple>() {
                tuple.as_slice().to_vec()
            } else {
                Vec::new()
            };
            let longest = values
                .iter()
                .filter_map(|v| text_len(v))
                .max()
                .unwrap_or(1)
                .max(1);
            if longest > 1 && len.saturating_mul(longest) > limit {
                return Err(too_big(vm, "the translated string"));
            }
        }
        "to_bytes" => {
            if let Some(length) = argument(args, 0, "length").and_then(|l| as_int(l))
                && to_usize_saturating(length) > limit
            {
                return Err(too_big(vm, "the bytes"));
            }
        }
        _ => {}
    }
    Ok(())
}

/// The body of a bound guarded method: `args[0]` is the object.
fn call_guarded(name: &'static str, mut args: FuncArgs, vm: &VirtualMachine) -> PyResult {
    if args.args.is_empty() {
        return Err(vm.new_type_error(format!("{name}() is missing its object")));
    }
    let obj = args.args.remove(0);
    check_method(name, &obj, &mut args, vm)?;
    vm.call_method(&obj, name, args)
}

macro_rules! guarded_methods {
    ($($name:literal => $call:ident, $attr:ident;)*) => {
        $(
            fn $call(args: FuncArgs, vm: &VirtualMachine) -> PyResult {
                call_guarded($name, args, vm)
            }
            fn $attr(obj: PyObjectRef, vm: &VirtualMachine) -> PyResult {
                guarded_attribute($name, obj, vm)
            }
        )*

        thread_local! {
            /// The bound-method definitions, one set per thread (they are not `Sync`, and
            /// binding needs `'static`): leaked once per worker thread.
            static METHOD_DEFS: &'static [PyMethodDef] = Box::leak(Box::new([$(
                PyMethodDef::new_const($name, $call, PyMethodFlags::empty(), None),
            )*]));
        }

        /// The `_weft_attr_<name>` guards, with their names.
        fn attribute_guards(vm: &VirtualMachine) -> Vec<(&'static str, PyObjectRef)> {
            vec![$(
                (
                    crate::check::attribute_guard($name).unwrap_or(concat!("_weft_attr_", $name)),
                    vm.new_function(concat!("_weft_attr_", $name), $attr).into(),
                ),
            )*]
        }
    };
}

guarded_methods! {
    "ljust" => call_ljust, attr_ljust;
    "rjust" => call_rjust, attr_rjust;
    "center" => call_center, attr_center;
    "zfill" => call_zfill, attr_zfill;
    "expandtabs" => call_expandtabs, attr_expandtabs;
    "replace" => call_replace, attr_replace;
    "join" => call_join, attr_join;
    "translate" => call_translate, attr_translate;
    "to_bytes" => call_to_bytes, attr_to_bytes;
}

/// `obj.<name>`: the guarded bound method when `obj` is a str or bytes (an int for
/// `to_bytes`), else the attribute itself.
fn guarded_attribute(name: &'static str, obj: PyObjectRef, vm: &VirtualMachine) -> PyResult {
    let guarded = if name == "to_bytes" {
        obj.downcast_ref::<PyInt>().is_some()
    } else {
        text_len(&obj).is_some()
    };
    if guarded {
        // Look the attribute up first so that a missing method raises the usual error.
        obj.get_attr(name, vm)?;
        let def: Option<&'static PyMethodDef> =
            METHOD_DEFS.with(|defs| defs.iter().find(|d| d.name == name));
        match def {
            Some(def) => Ok(def.build_bound_function(&vm.ctx, obj).into()),
            None => obj.get_attr(name, vm),
        }
    } else {
        obj.get_attr(name, vm)
    }
}

/// Every guard, by the name the rewritten code calls it with.
pub(crate) fn all(vm: &VirtualMachine) -> Vec<(&'static str, PyObjectRef)> {
    let mut guards: Vec<(&'static str, PyObjectRef)> = vec![
        ("_weft_mul", vm.new_function("_weft_mul", guard_mul).into()),
        (
            "_weft_imul",
            vm.new_function("_weft_imul", guard_imul).into(),
        ),
        ("_weft_pow", vm.new_function("_weft_pow", guard_pow).into()),
        (
            "_weft_ipow",
            vm.new_function("_weft_ipow", guard_ipow).into(),
        ),
        (
            "_weft_lshift",
            vm.new_function("_weft_lshift", guard_lshift).into(),
        ),
        (
            "_weft_ilshift",
            vm.new_function("_weft_ilshift", guard_ilshift).into(),
        ),
        ("_weft_mod", vm.new_function("_weft_mod", guard_mod).into()),
        (
            "_weft_imod",
            vm.new_function("_weft_imod", guard_imod).into(),
        ),
        (
            "_weft_spec",
            vm.new_function("_weft_spec", guard_spec).into(),
        ),
    ];
    guards.extend(attribute_guards(vm));
    guards
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_formats() {
        assert_eq!(scan_percent_format(b"%s and %d"), (true, false));
        assert_eq!(scan_percent_format(b"%9999d"), (true, false));
        assert_eq!(scan_percent_format(b"%10000d"), (false, false));
        assert_eq!(scan_percent_format(b"%.100000f"), (false, false));
        assert_eq!(scan_percent_format(b"%*d"), (true, true));
        assert_eq!(scan_percent_format(b"%(name)-5s %%"), (true, false));
        assert_eq!(scan_percent_format(b"100%%"), (true, false));
    }

    #[test]
    fn occurrences() {
        assert_eq!(count_occurrences(b"aaaa", b"aa"), 2);
        assert_eq!(count_occurrences(b"abc", b""), 4);
        assert_eq!(count_occurrences(b"abc", b"x"), 0);
    }
}
