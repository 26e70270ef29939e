//! One interpreter with the restricted builtins, living on one worker thread.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use rustpython_vm::{
    AsObject, Interpreter, PyObjectRef, PyPayload, PyRef, PyResult, Settings, VirtualMachine,
    builtins::{PyBaseExceptionRef, PyCode, PyDictRef, PyStr},
    compiler::Mode,
    function::FuncArgs,
    scope::Scope,
    signal::{UserSignalSender, user_signal_channel},
};
use serde_json::Value;

use crate::check::{self, ALLOWED_BUILTINS, BLOCK_NAME, SOURCE_PATH};
use crate::{CodeRun, Job, SandboxError, convert, guards};

/// Frames below the body's own calls: the module code and `_block` itself.
const BASE_DEPTH: usize = 2;

/// A `range` longer than this is iterated by a generator (interruptible, never materialized
/// in one step).
const RANGE_LAZY_ABOVE: usize = 1_000_000;

/// Total bytes of captured `print` output kept per run.
const MAX_PRINTED_BYTES: usize = 1 << 20;

/// Compiled bodies kept per interpreter.
const CODE_CACHE_SIZE: usize = 256;

/// Python used by the sandbox itself (not reachable from the body).
const PRELUDE: &str = "\
def lazy_range(r):
    for i in r:
        yield i
";

/// `print` output of the current run.
#[derive(Default)]
struct Printed {
    lines: RefCell<Vec<String>>,
    bytes: Cell<usize>,
    truncated: Cell<bool>,
}

impl Printed {
    fn reset(&self) {
        self.lines.borrow_mut().clear();
        self.bytes.set(0);
        self.truncated.set(false);
    }

    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.lines.borrow_mut())
    }

    fn print(&self, args: FuncArgs, vm: &VirtualMachine) -> PyResult<()> {
        let text_arg = |name: &str, default: &str| -> PyResult<String> {
            match args.kwargs.get(name) {
                None => Ok(default.to_owned()),
                Some(value) if vm.is_none(value) => Ok(default.to_owned()),
                Some(value) => match value.downcast_ref::<PyStr>() {
                    Some(s) => Ok(s.to_string_lossy().into_owned()),
                    None => Err(vm.new_type_error(format!("{name} must be None or a string"))),
                },
            }
        };
        for name in args.kwargs.keys() {
            if !matches!(name.as_str(), "sep" | "end" | "flush") {
                return Err(vm.new_type_error(format!(
                    "print() got an unsupported keyword argument '{name}'"
                )));
            }
        }
        let sep = text_arg("sep", " ")?;
        let end = text_arg("end", "\n")?;
        let mut line = String::new();
        for (i, arg) in args.args.iter().enumerate() {
            if i > 0 {
                line.push_str(&sep);
            }
            line.push_str(&arg.str(vm)?.to_string_lossy());
            if line.len() > MAX_PRINTED_BYTES {
                break;
            }
        }
        line.push_str(&end);
        if line.ends_with('\n') {
            line.pop();
        }
        if self.truncated.get() {
            return Ok(());
        }
        let total = self.bytes.get() + line.len();
        if total > MAX_PRINTED_BYTES {
            self.truncated.set(true);
            self.lines
                .borrow_mut()
                .push("... (print output truncated)".to_owned());
        } else {
            self.bytes.set(total);
            self.lines.borrow_mut().push(line);
        }
        Ok(())
    }
}

/// An interpreter set up for sandboxed runs, with its code cache.
pub(crate) struct Engine {
    interpreter: Interpreter,
    signal: UserSignalSender,
    printed: Rc<Printed>,
    builtins: PyDictRef,
    cache: HashMap<(String, Vec<String>), Result<PyRef<PyCode>, SandboxError>>,
}

impl Engine {
    pub(crate) fn new() -> Result<Engine, SandboxError> {
        let (sender, receiver) = user_signal_channel();
        let mut settings = Settings::default();
        settings.install_signal_handlers = false;
        settings.isolated = true;
        settings.import_site = false;
        settings.user_site_directory = false;
        settings.write_bytecode = false;
        settings.faulthandler = false;
        let interpreter = Interpreter::with_init(settings, |vm| {
            vm.set_user_signal_channel(receiver);
        });
        let printed = Rc::new(Printed::default());
        let builtins = interpreter
            .enter(|vm| restricted_builtins(vm, printed.clone()))
            .map_err(|e| {
                SandboxError::Internal(format!("setting up the interpreter: {:?}", e.as_object()))
            })?;
        Ok(Engine {
            interpreter,
            signal: sender,
            printed,
            builtins,
            cache: HashMap::new(),
        })
    }

    /// Sends signals to this interpreter; see `pool.rs`.
    pub(crate) fn signal(&self) -> UserSignalSender {
        self.signal.clone()
    }

    fn code(&mut self, body: &str, fields: &[String]) -> Result<PyRef<PyCode>, SandboxError> {
        let key = (body.to_owned(), fields.to_vec());
        if let Some(cached) = self.cache.get(&key) {
            return cached.clone();
        }
        let compiled = match check::prepare(body, fields) {
            Ok(code) => Ok(self.interpreter.enter(|vm| vm.ctx.new_code(code))),
            Err(mut errors) => Err(errors.swap_remove(0)),
        };
        if self.cache.len() >= CODE_CACHE_SIZE {
            self.cache.clear();
        }
        self.cache.insert(key, compiled.clone());
        compiled
    }

    pub(crate) fn run(&mut self, job: &Job) -> Result<CodeRun, SandboxError> {
        guards::set_budget(job.limits.max_memory_bytes);
        let code = self.code(&job.body, &job.fields)?;
        self.printed.reset();
        let builtins = self.builtins.clone();
        let value = self.interpreter.enter(|vm| {
            vm.recursion_limit
                .set(job.limits.max_recursion.saturating_add(BASE_DEPTH));
            let globals = vm.ctx.new_dict();
            let outcome = call_block(vm, &globals, builtins, code, job)
                .and_then(|result| convert::to_json(&result, vm));
            // Break the cycle between the globals and the functions defined in them.
            globals.clear();
            outcome
        })?;
        Ok(CodeRun {
            value,
            printed: self.printed.take(),
        })
    }
}

fn call_block(
    vm: &VirtualMachine,
    globals: &PyDictRef,
    builtins: PyDictRef,
    code: PyRef<PyCode>,
    job: &Job,
) -> Result<PyObjectRef, SandboxError> {
    let raised = |e: PyBaseExceptionRef| exception_error(vm, &e, job.limits.max_recursion);
    let internal = |e: PyBaseExceptionRef| {
        SandboxError::Internal(format!(
            "{}",
            exception_error(vm, &e, job.limits.max_recursion)
        ))
    };
    globals
        .set_item("__builtins__", builtins.copy().into_ref(&vm.ctx).into(), vm)
        .map_err(internal)?;
    let scope = Scope::with_builtins(None, globals.clone(), vm);
    vm.run_code_obj(code, scope).map_err(raised)?;
    let function = globals.get_item(BLOCK_NAME, vm).map_err(internal)?;

    let mut args = vec![convert::to_python(&job.initial, vm)?];
    if job.fields.is_empty() {
        args.push(convert::to_python(&job.input, vm)?);
    } else {
        for field in &job.fields {
            let value = match &job.input {
                Value::Object(map) => match map.get(field) {
                    Some(value) => convert::to_python(value, vm)?,
                    None => vm.ctx.none(),
                },
                _ => vm.ctx.none(),
            };
            args.push(value);
        }
    }
    function.call(args, vm).map_err(raised)
}

/// The builtins the body sees.
fn restricted_builtins(vm: &VirtualMachine, printed: Rc<Printed>) -> PyResult<PyDictRef> {
    // `import` goes through the VM's own builtins module, whatever the frame's builtins are,
    // so `__import__` is replaced there. The one import the VM itself insists on is `sys`
    // when it reports an exception raised by a destructor (a generator's `finally` stopped by
    // the watchdog): it gets a stand-in module whose only member is a silent
    // `unraisablehook`. The real `sys` stays out of reach.
    let unraisable_hook = vm.new_function("unraisablehook", |_args: FuncArgs| {});
    let stand_in = vm.ctx.new_dict();
    stand_in.set_item("unraisablehook", unraisable_hook.into(), vm)?;
    let stand_in: PyObjectRef = vm.new_module("sys", stand_in, None).into();
    let refuse_import = vm.new_function(
        "__import__",
        move |args: FuncArgs, vm: &VirtualMachine| -> PyResult {
            let name = args.args.first().and_then(|n| n.downcast_ref::<PyStr>());
            if name.is_some_and(|n| n.to_str() == Some("sys")) {
                return Ok(stand_in.clone());
            }
            Err(vm.new_import_error(
                "import is not allowed in the sandbox",
                vm.ctx.new_str("__import__"),
            ))
        },
    );
    vm.builtins.set_attr("__import__", refuse_import, vm)?;

    let lazy_range = prelude_function(vm, "lazy_range")?;
    let real_range = vm.builtins.get_attr("range", vm)?;
    let range = vm.new_function(
        "range",
        move |args: FuncArgs, vm: &VirtualMachine| -> PyResult {
            let range = real_range.call(args, vm)?;
            match range.length(vm) {
                Ok(len) if len <= RANGE_LAZY_ABOVE => Ok(range),
                _ => lazy_range.call((range,), vm),
            }
        },
    );
    let print = vm.new_function(
        "print",
        move |args: FuncArgs, vm: &VirtualMachine| -> PyResult<()> { printed.print(args, vm) },
    );

    let dict = vm.ctx.new_dict();
    for name in ALLOWED_BUILTINS {
        if *name != "range" {
            dict.set_item(*name, vm.builtins.get_attr(*name, vm)?, vm)?;
        }
    }
    dict.set_item("range", range.into(), vm)?;
    dict.set_item("print", print.into(), vm)?;
    dict.set_item("True", vm.ctx.new_bool(true).into(), vm)?;
    dict.set_item("False", vm.ctx.new_bool(false).into(), vm)?;
    dict.set_item("None", vm.ctx.none(), vm)?;
    for (name, guard) in guards::all(vm) {
        dict.set_item(name, guard, vm)?;
    }
    #[cfg(test)]
    dict.set_item(
        "weft_test_panic",
        vm.new_function("weft_test_panic", |_args: FuncArgs| -> PyResult<()> {
            panic!("a test panic inside the VM")
        })
        .into(),
        vm,
    )?;
    Ok(dict)
}

/// A function defined by [`PRELUDE`], run with the full builtins (the body cannot reach it:
/// it has no name the body may use, and its attributes begin with underscores).
fn prelude_function(vm: &VirtualMachine, name: &str) -> PyResult<PyObjectRef> {
    let code = vm
        .compile(PRELUDE, Mode::Exec, "<weft>".to_owned())
        .map_err(|e| vm.new_runtime_error(format!("compiling the prelude: {e}")))?;
    let globals = vm.ctx.new_dict();
    vm.run_code_obj(code, Scope::with_builtins(None, globals.clone(), vm))?;
    globals.get_item(name, vm)
}

/// An exception raised by the body, as an error.
fn exception_error(
    vm: &VirtualMachine,
    exception: &PyBaseExceptionRef,
    max_recursion: usize,
) -> SandboxError {
    let kind = exception.class().name().to_string();
    match kind.as_str() {
        "RecursionError" => return SandboxError::Recursion(max_recursion),
        "MemoryError" => return SandboxError::Memory,
        _ => {}
    }
    let message = exception
        .as_object()
        .str(vm)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut line = 0;
    let mut traceback = exception.__traceback__();
    while let Some(entry) = traceback {
        if entry.frame.code.source_path().as_str() == SOURCE_PATH {
            line = entry.lineno.get();
        }
        traceback = entry.next.lock().clone();
    }
    SandboxError::Raised {
        kind,
        line,
        message,
    }
}
