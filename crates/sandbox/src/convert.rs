//! JSON to Python and back.

use num_traits::ToPrimitive;
use rustpython_vm::{
    AsObject, PyObject, PyObjectRef, VirtualMachine,
    builtins::{PyDict, PyFloat, PyInt, PyList, PyStr, PyTuple},
};
use serde_json::Value;

use crate::SandboxError;

/// Nesting deeper than this is refused both ways (it also catches a list that contains
/// itself).
const MAX_DEPTH: usize = 500;

/// A JSON value as a Python object: objects become dicts, arrays lists.
pub(crate) fn to_python(value: &Value, vm: &VirtualMachine) -> Result<PyObjectRef, SandboxError> {
    to_python_at(value, vm, 0)
}

fn to_python_at(
    value: &Value,
    vm: &VirtualMachine,
    depth: usize,
) -> Result<PyObjectRef, SandboxError> {
    if depth > MAX_DEPTH {
        return Err(SandboxError::Internal(format!(
            "the input is nested more than {MAX_DEPTH} levels deep"
        )));
    }
    Ok(match value {
        Value::Null => vm.ctx.none(),
        Value::Bool(b) => vm.ctx.new_bool(*b).into(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                vm.ctx.new_int(i).into()
            } else if let Some(u) = n.as_u64() {
                vm.ctx.new_int(u).into()
            } else {
                vm.ctx.new_float(n.as_f64().unwrap_or(f64::NAN)).into()
            }
        }
        Value::String(s) => vm.ctx.new_str(s.as_str()).into(),
        Value::Array(items) => {
            let items = items
                .iter()
                .map(|item| to_python_at(item, vm, depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            vm.ctx.new_list(items).into()
        }
        Value::Object(map) => {
            let dict = vm.ctx.new_dict();
            for (key, item) in map {
                let item = to_python_at(item, vm, depth + 1)?;
                dict.set_item(key.as_str(), item, vm)
                    .map_err(|_| SandboxError::Internal("could not build a dict".to_owned()))?;
            }
            dict.into()
        }
    })
}

/// The return value as JSON: None, bool, int (within 64 bits), finite float, str, list,
/// tuple and dict with str keys.
pub(crate) fn to_json(obj: &PyObject, vm: &VirtualMachine) -> Result<Value, SandboxError> {
    to_json_at(obj, vm, 0)
}

fn not_json(message: impl Into<String>) -> SandboxError {
    SandboxError::NotJson(message.into())
}

fn to_json_at(obj: &PyObject, vm: &VirtualMachine, depth: usize) -> Result<Value, SandboxError> {
    if depth > MAX_DEPTH {
        return Err(not_json(format!(
            "it is nested more than {MAX_DEPTH} levels deep (or contains itself)"
        )));
    }
    if vm.is_none(obj) {
        return Ok(Value::Null);
    }
    if obj.class().is(vm.ctx.types.bool_type) {
        return Ok(Value::Bool(obj.is(&vm.ctx.true_value)));
    }
    if let Some(int) = obj.downcast_ref::<PyInt>() {
        let n = int.as_bigint();
        return if let Some(i) = n.to_i64() {
            Ok(Value::from(i))
        } else if let Some(u) = n.to_u64() {
            Ok(Value::from(u))
        } else {
            Err(not_json("an integer does not fit in 64 bits"))
        };
    }
    if let Some(float) = obj.downcast_ref::<PyFloat>() {
        let f = float.to_f64();
        return serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| not_json(format!("{f} is not a JSON number")));
    }
    if let Some(s) = obj.downcast_ref::<PyStr>() {
        return s
            .to_str()
            .map(|s| Value::String(s.to_owned()))
            .ok_or_else(|| not_json("a string contains a lone surrogate"));
    }
    if let Some(list) = obj.downcast_ref::<PyList>() {
        let items: Vec<PyObjectRef> = list.borrow_vec().to_vec();
        return items
            .iter()
            .map(|item| to_json_at(item, vm, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Some(tuple) = obj.downcast_ref::<PyTuple>() {
        return tuple
            .iter()
            .map(|item| to_json_at(item, vm, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array);
    }
    if let Some(dict) = obj.downcast_ref::<PyDict>() {
        let mut map = serde_json::Map::new();
        for (key, item) in dict.items_vec() {
            let Some(key) = key.downcast_ref::<PyStr>().and_then(|k| k.to_str()) else {
                let shown = key
                    .repr(vm)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| "?".to_owned());
                return Err(not_json(format!("the dict key {shown} is not a string")));
            };
            map.insert(key.to_owned(), to_json_at(&item, vm, depth + 1)?);
        }
        return Ok(Value::Object(map));
    }
    Err(not_json(format!(
        "a value of type `{}` cannot be converted",
        obj.class().name()
    )))
}
