//! The static check and the rewrite that runs before compiling.
//!
//! [`prepare`] parses the body, walks the syntax tree for anything refused by
//! docs/flows.md#python-in-code-nodes,
//! rewrites the operations that can allocate without bound into calls to native guards
//! (see `guards.rs`), wraps the statements in `def _block(...)` and compiles the result to
//! bytecode. The wrapper is built as a tree rather than as text, so line numbers in errors
//! are the body's own and a triple-quoted string in the body is not re-indented.

use std::collections::HashSet;

use ruff_source_file::SourceFileBuilder;
use ruff_text_size::{Ranged, TextRange, TextSize};
use rustpython_compiler::ast::{
    self, Expr, ExprContext, Identifier, InterpolatedStringElement, Operator, Pattern, Stmt,
    name::Name,
    visitor::{self, Visitor, transformer, transformer::Transformer},
};
use rustpython_compiler::{CodeObject, CompileOpts, codegen, parser};

use crate::SandboxError;

/// The builtins the code can use (docs/flows.md#python-in-code-nodes), besides `print` (captured)
/// and the constants
/// `True`, `False` and `None`.
pub const ALLOWED_BUILTINS: &[&str] = &[
    "abs",
    "bool",
    "dict",
    "enumerate",
    "float",
    "int",
    "isinstance",
    "len",
    "list",
    "max",
    "min",
    "range",
    "reversed",
    "round",
    "set",
    "sorted",
    "str",
    "sum",
    "tuple",
    "zip",
];

/// Names refused by the static check wherever they appear (unless one of them is the name of
/// a parameter: a field called `type` or the `input` parameter may be used). None of them is
/// in the restricted builtins anyway; refusing them gives a clear error before running.
pub const REFUSED_NAMES: &[&str] = &[
    "eval",
    "exec",
    "open",
    "getattr",
    "setattr",
    "delattr",
    "hasattr",
    "type",
    "vars",
    "dir",
    "globals",
    "locals",
    "compile",
    "breakpoint",
    "input",
    "help",
    "memoryview",
    "object",
    "super",
    "exit",
    "quit",
    "classmethod",
    "staticmethod",
    "property",
];

/// Attributes refused by name: string formatting that can reach attributes, and the method
/// resolution order.
const REFUSED_ATTRIBUTES: &[&str] = &["format", "format_map", "mro"];

/// Attribute prefixes of frames, code objects, tracebacks, generators and coroutines: these
/// lead to globals and builtins without any underscore.
const REFUSED_ATTRIBUTE_PREFIXES: &[&str] = &["gi_", "cr_", "ag_", "f_", "tb_", "co_"];

/// The wrapper function's name.
pub(crate) const BLOCK_NAME: &str = "_block";

/// The file name given to compiled bodies; tracebacks are matched against it.
pub(crate) const SOURCE_PATH: &str = "<code>";

/// The largest width or precision allowed in a literal format spec.
const MAX_SPEC_DIGITS: usize = 4;

/// Checks `body` and `fields`, rewrites and compiles. Every refusal is returned, each with its
/// line; a syntax error is returned alone.
pub(crate) fn prepare(body: &str, fields: &[String]) -> Result<CodeObject, Vec<SandboxError>> {
    let params = parameters(fields)?;
    let lines = LineIndex::new(body);
    if let Some((line, message)) = too_deep(body) {
        return Err(vec![SandboxError::Refused { line, message }]);
    }
    let parsed = parser::parse_module(body).map_err(|error| {
        vec![SandboxError::Syntax {
            line: lines.line(error.location.start()),
            message: error.error.to_string(),
        }]
    })?;
    let mut module = parsed.into_syntax();

    let mut checker = Checker {
        lines: &lines,
        params: &params,
        errors: Vec::new(),
        seen: HashSet::new(),
    };
    checker.visit_body(&module.body);
    if !checker.errors.is_empty() {
        return Err(checker.errors);
    }

    Rewriter.visit_body(&mut module.body);
    let mut statements = std::mem::take(&mut module.body);
    if statements.is_empty() {
        statements.push(Stmt::Pass(ast::StmtPass {
            node_index: Default::default(),
            range: TextRange::default(),
        }));
    }
    module.body = vec![wrapper(&params, statements)];

    let source_file = SourceFileBuilder::new(SOURCE_PATH, body).finish();
    codegen::compile::compile_program(&module, source_file, CompileOpts::default()).map_err(
        |error| {
            vec![SandboxError::Syntax {
                line: error.location.map(|l| l.line.get()).unwrap_or(0),
                message: error.error.to_string(),
            }]
        },
    )
}

/// The longest body accepted.
const MAX_BODY_BYTES: usize = 1 << 20;

/// Nesting limits, checked on tokens before parsing: the parser, the checks and the
/// compiler recurse once per level, and a stack overflow would abort the process.
const MAX_BRACKET_DEPTH: usize = 100;
const MAX_INDENT_DEPTH: usize = 100;
/// Operators, opening brackets and other tokens that can nest an expression one level
/// deeper (`.`, `lambda`, `if`/`else`), in one logical line.
const MAX_OPERATORS_PER_LINE: usize = 5000;

/// Whether the body is too large or too deeply nested to parse safely: the line where a
/// limit was passed (counted from line breaks between tokens, so a multi-line string before
/// it makes it approximate), and why.
fn too_deep(body: &str) -> Option<(usize, String)> {
    use parser::lexer::lex;
    use rustpython_compiler::ast::token::TokenKind as T;

    if body.len() > MAX_BODY_BYTES {
        return Some((1, format!("the code is longer than {MAX_BODY_BYTES} bytes")));
    }
    let mut lexer = lex(body, parser::Mode::Module);
    let mut brackets = 0usize;
    let mut indents = 0usize;
    let mut operators = 0usize;
    let mut line = 1usize;
    loop {
        let kind = lexer.next_token();
        let offset = line;
        match kind {
            T::EndOfFile => return None,
            T::Lpar | T::Lsqb | T::Lbrace | T::FStringStart | T::TStringStart => {
                brackets += 1;
                // `f()()()` and `a[0][0]` nest without deepening the brackets.
                operators += 1;
                if operators > MAX_OPERATORS_PER_LINE {
                    return Some((line, too_many_operators()));
                }
                if brackets > MAX_BRACKET_DEPTH {
                    return Some((
                        offset,
                        format!("brackets are nested more than {MAX_BRACKET_DEPTH} levels deep"),
                    ));
                }
            }
            T::Rpar | T::Rsqb | T::Rbrace | T::FStringEnd | T::TStringEnd => {
                brackets = brackets.saturating_sub(1);
            }
            T::Indent => {
                indents += 1;
                if indents > MAX_INDENT_DEPTH {
                    return Some((
                        offset,
                        format!("blocks are nested more than {MAX_INDENT_DEPTH} levels deep"),
                    ));
                }
            }
            T::Dedent => indents = indents.saturating_sub(1),
            T::Newline => {
                operators = 0;
                line += 1;
            }
            T::NonLogicalNewline => line += 1,
            T::Comma | T::Semi | T::Colon | T::Equal => {}
            kind if kind.is_operator()
                || matches!(kind, T::Lambda | T::If | T::Else | T::Await | T::Yield) =>
            {
                operators += 1;
                if operators > MAX_OPERATORS_PER_LINE {
                    return Some((offset, too_many_operators()));
                }
            }
            _ => {}
        }
    }
}

fn too_many_operators() -> String {
    format!(
        "a statement has more than {MAX_OPERATORS_PER_LINE} operators and brackets; split it up"
    )
}

/// The wrapper's parameters: `initial` then the fields, or `initial, input`.
fn parameters(fields: &[String]) -> Result<Vec<String>, Vec<SandboxError>> {
    let mut errors = Vec::new();
    let mut refuse = |message: String| errors.push(SandboxError::Refused { line: 0, message });
    let mut params = vec!["initial".to_owned()];
    if fields.is_empty() {
        params.push("input".to_owned());
    }
    for field in fields {
        if !is_identifier(field) {
            let shown = shorten(field);
            refuse(format!("field `{shown}` is not a valid Python name"));
        } else if field.starts_with('_') {
            refuse(format!(
                "field `{field}`: names starting with an underscore are not allowed"
            ));
        } else if field == "initial" {
            refuse("field `initial` clashes with the `initial` parameter".to_owned());
        } else if params.contains(field) {
            refuse(format!("field `{field}` is listed twice"));
        } else {
            params.push(field.clone());
        }
    }
    if errors.is_empty() {
        Ok(params)
    } else {
        Err(errors)
    }
}

/// A field name as messages show it: a long one cut to its start and its length.
fn shorten(name: &str) -> String {
    const SHOWN: usize = 40;
    let count = name.chars().count();
    if count <= SHOWN {
        return name.to_owned();
    }
    let start: String = name.chars().take(SHOWN).collect();
    format!("{start}… ({count} characters)")
}

/// Whether `name` is a Python identifier (and not a keyword): it must parse as exactly a name.
/// Only letters, digits and `_` reach the parser, so a hostile entry (100,000 brackets) is
/// refused without the parser's recursion.
fn is_identifier(name: &str) -> bool {
    let word_like = name.chars().all(|c| c.is_alphanumeric() || c == '_');
    if name.is_empty() || !word_like || name.starts_with(|c: char| c.is_ascii_digit()) {
        return false;
    }
    match parser::parse_expression(name) {
        Ok(parsed) => matches!(parsed.expr(), Expr::Name(n) if n.id.as_str() == name),
        Err(_) => false,
    }
}

/// `def _block(<params>): <body>`, with empty ranges (line 1) for the wrapper's own nodes.
fn wrapper(params: &[String], body: Vec<Stmt>) -> Stmt {
    let range = TextRange::default();
    let args = params
        .iter()
        .map(|name| ast::ParameterWithDefault {
            range,
            node_index: Default::default(),
            parameter: ast::Parameter {
                range,
                node_index: Default::default(),
                name: Identifier::new(name.as_str(), range),
                annotation: None,
            },
            default: None,
        })
        .collect();
    Stmt::FunctionDef(ast::StmtFunctionDef {
        node_index: Default::default(),
        range,
        is_async: false,
        decorator_list: Vec::new(),
        name: Identifier::new(BLOCK_NAME, range),
        type_params: None,
        parameters: Box::new(ast::Parameters {
            range,
            node_index: Default::default(),
            posonlyargs: Vec::new(),
            args,
            vararg: None,
            kwonlyargs: Vec::new(),
            kwarg: None,
        }),
        returns: None,
        body,
    })
}

/// Byte offset to 1-based line.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        LineIndex { starts }
    }

    fn line(&self, offset: TextSize) -> usize {
        let offset = offset.to_usize();
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

/// Walks the tree and collects refusals.
struct Checker<'a> {
    lines: &'a LineIndex,
    params: &'a [String],
    errors: Vec<SandboxError>,
    seen: HashSet<(usize, String)>,
}

impl Checker<'_> {
    fn refuse(&mut self, range: TextRange, message: String) {
        let line = self.lines.line(range.start());
        if self.seen.insert((line, message.clone())) {
            self.errors.push(SandboxError::Refused { line, message });
        }
    }

    /// A name that is read, bound or defined. A lone `_` (the usual throwaway variable) is
    /// allowed: it is an ordinary local name.
    fn name(&mut self, name: &str, range: TextRange) {
        if name.starts_with('_') && name != "_" {
            self.refuse(
                range,
                format!("`{name}`: names starting with an underscore are not allowed"),
            );
        } else if REFUSED_NAMES.contains(&name) && !self.params.iter().any(|p| p == name) {
            self.refuse(range, format!("`{name}` is not allowed"));
        }
    }

    fn identifier(&mut self, identifier: &Identifier) {
        self.name(identifier.id.as_str(), identifier.range);
    }

    /// An attribute name (`x.<name>`, or a keyword in a class pattern).
    fn attribute(&mut self, name: &str, range: TextRange) {
        if name.starts_with('_') {
            self.refuse(
                range,
                format!("`{name}`: names starting with an underscore are not allowed"),
            );
        } else if name == "format" || name == "format_map" {
            self.refuse(
                range,
                format!("`.{name}()` is not allowed; use an f-string instead"),
            );
        } else if REFUSED_ATTRIBUTES.contains(&name)
            || REFUSED_ATTRIBUTE_PREFIXES
                .iter()
                .any(|prefix| name.starts_with(prefix))
        {
            self.refuse(range, format!("`.{name}` is not allowed"));
        }
    }

    /// The format spec of an f-string field: literal widths and precisions are limited, and a
    /// nested field must not touch digits or another nested field (so that a computed width
    /// is at most what `_weft_spec` allows).
    fn format_spec(&mut self, elements: &[InterpolatedStringElement], range: TextRange) {
        let mut previous_was_field = false;
        let mut previous_ends_with_digit = false;
        for element in elements {
            match element {
                InterpolatedStringElement::Literal(literal) => {
                    let text: &str = &literal.value;
                    if longest_digit_run(text) > MAX_SPEC_DIGITS {
                        self.refuse(
                            range,
                            "a format width or precision above 9999 is not allowed".to_owned(),
                        );
                    }
                    if previous_was_field && text.starts_with(|c: char| c.is_ascii_digit()) {
                        self.refuse(
                            range,
                            "a `{...}` field in a format spec must not touch digits".to_owned(),
                        );
                    }
                    previous_was_field = false;
                    previous_ends_with_digit = text.ends_with(|c: char| c.is_ascii_digit());
                }
                InterpolatedStringElement::Interpolation(_) => {
                    if previous_was_field || previous_ends_with_digit {
                        self.refuse(
                            range,
                            "a `{...}` field in a format spec must not touch digits or another field"
                                .to_owned(),
                        );
                    }
                    previous_was_field = true;
                    previous_ends_with_digit = false;
                }
            }
        }
    }

    fn refuse_async(&mut self, range: TextRange) {
        self.refuse(range, "`async` and `await` are not allowed".to_owned());
    }
}

pub(crate) fn longest_digit_run(text: &str) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for c in text.chars() {
        if c.is_ascii_digit() {
            current += 1;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    longest
}

impl<'a> Visitor<'a> for Checker<'_> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Import(_) | Stmt::ImportFrom(_) => {
                self.refuse(stmt.range(), "`import` is not allowed".to_owned());
                return;
            }
            Stmt::ClassDef(_) => {
                self.refuse(stmt.range(), "`class` is not allowed".to_owned());
                return;
            }
            Stmt::TypeAlias(_) => {
                self.refuse(stmt.range(), "`type` is not allowed".to_owned());
                return;
            }
            Stmt::IpyEscapeCommand(_) => {
                self.refuse(stmt.range(), "this syntax is not allowed".to_owned());
                return;
            }
            Stmt::FunctionDef(def) => {
                if def.is_async {
                    self.refuse_async(def.range);
                }
                self.identifier(&def.name);
            }
            Stmt::For(ast::StmtFor {
                is_async, range, ..
            })
            | Stmt::With(ast::StmtWith {
                is_async, range, ..
            }) if *is_async => {
                self.refuse_async(*range);
            }
            Stmt::Global(ast::StmtGlobal { names, .. })
            | Stmt::Nonlocal(ast::StmtNonlocal { names, .. }) => {
                for name in names {
                    self.identifier(name);
                }
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(name) => self.name(name.id.as_str(), name.range),
            Expr::Attribute(attribute) => {
                self.attribute(attribute.attr.id.as_str(), attribute.attr.range)
            }
            Expr::Await(await_) => self.refuse_async(await_.range),
            Expr::TString(t) => {
                self.refuse(t.range, "template strings are not allowed".to_owned());
                return;
            }
            Expr::IpyEscapeCommand(command) => {
                self.refuse(command.range, "this syntax is not allowed".to_owned());
                return;
            }
            Expr::FString(fstring) => {
                for part in fstring.value.iter() {
                    if let ast::FStringPart::FString(f) = part {
                        for element in &f.elements {
                            if let InterpolatedStringElement::Interpolation(field) = element
                                && let Some(spec) = &field.format_spec
                            {
                                self.format_spec(&spec.elements, field.range);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }

    fn visit_comprehension(&mut self, comprehension: &'a ast::Comprehension) {
        if comprehension.is_async {
            self.refuse_async(comprehension.range);
        }
        visitor::walk_comprehension(self, comprehension);
    }

    fn visit_except_handler(&mut self, handler: &'a ast::ExceptHandler) {
        let ast::ExceptHandler::ExceptHandler(inner) = handler;
        if let Some(name) = &inner.name {
            self.identifier(name);
        }
        visitor::walk_except_handler(self, handler);
    }

    fn visit_parameter(&mut self, parameter: &'a ast::Parameter) {
        self.identifier(&parameter.name);
        visitor::walk_parameter(self, parameter);
    }

    fn visit_keyword(&mut self, keyword: &'a ast::Keyword) {
        if let Some(arg) = &keyword.arg
            && arg.id.starts_with('_')
        {
            self.refuse(
                arg.range,
                format!(
                    "`{}`: names starting with an underscore are not allowed",
                    arg.id
                ),
            );
        }
        visitor::walk_keyword(self, keyword);
    }

    fn visit_alias(&mut self, alias: &'a ast::Alias) {
        self.refuse(alias.range, "`import` is not allowed".to_owned());
    }

    fn visit_pattern(&mut self, pattern: &'a Pattern) {
        match pattern {
            Pattern::MatchAs(ast::PatternMatchAs {
                name: Some(name), ..
            })
            | Pattern::MatchStar(ast::PatternMatchStar {
                name: Some(name), ..
            })
            | Pattern::MatchMapping(ast::PatternMatchMapping {
                rest: Some(name), ..
            }) => self.identifier(name),
            _ => {}
        }
        visitor::walk_pattern(self, pattern);
    }

    fn visit_pattern_keyword(&mut self, keyword: &'a ast::PatternKeyword) {
        // `case int(real=r)` reads the attribute `real` of the subject.
        self.attribute(keyword.attr.id.as_str(), keyword.attr.range);
        visitor::walk_pattern_keyword(self, keyword);
    }

    fn visit_type_param(&mut self, type_param: &'a ast::TypeParam) {
        self.refuse(
            type_param.range(),
            "type parameters are not allowed".to_owned(),
        );
    }
}

/// Rewrites guarded operations into calls to the native guards.
struct Rewriter;

fn binop_guard(op: Operator) -> Option<&'static str> {
    match op {
        Operator::Mult => Some("_weft_mul"),
        Operator::Pow => Some("_weft_pow"),
        Operator::LShift => Some("_weft_lshift"),
        Operator::Mod => Some("_weft_mod"),
        _ => None,
    }
}

fn augassign_guard(op: Operator) -> Option<&'static str> {
    match op {
        Operator::Mult => Some("_weft_imul"),
        Operator::Pow => Some("_weft_ipow"),
        Operator::LShift => Some("_weft_ilshift"),
        Operator::Mod => Some("_weft_imod"),
        _ => None,
    }
}

/// Methods that can build a result much larger than their inputs in one step: reading one of
/// these attributes is rewritten into a call of its guard, e.g. `_weft_attr_ljust(obj)`, which
/// checks the arguments before calling the real method.
pub(crate) fn attribute_guard(name: &str) -> Option<&'static str> {
    Some(match name {
        "ljust" => "_weft_attr_ljust",
        "rjust" => "_weft_attr_rjust",
        "center" => "_weft_attr_center",
        "zfill" => "_weft_attr_zfill",
        "expandtabs" => "_weft_attr_expandtabs",
        "replace" => "_weft_attr_replace",
        "join" => "_weft_attr_join",
        "translate" => "_weft_attr_translate",
        "to_bytes" => "_weft_attr_to_bytes",
        _ => return None,
    })
}

fn call(function: &'static str, args: Vec<Expr>, range: TextRange) -> Expr {
    Expr::Call(ast::ExprCall {
        node_index: Default::default(),
        range,
        func: Box::new(Expr::Name(ast::ExprName {
            node_index: Default::default(),
            range,
            id: Name::new_static(function),
            ctx: ExprContext::Load,
        })),
        arguments: ast::Arguments {
            range,
            node_index: Default::default(),
            args: args.into_boxed_slice(),
            keywords: Box::new([]),
        },
    })
}

fn placeholder() -> Expr {
    Expr::NoneLiteral(ast::ExprNoneLiteral::default())
}

/// The same target read instead of written (`a[i]` in `a[i] *= 2`).
fn as_load(target: &Expr) -> Expr {
    let mut expr = target.clone();
    match &mut expr {
        Expr::Name(n) => n.ctx = ExprContext::Load,
        Expr::Attribute(a) => a.ctx = ExprContext::Load,
        Expr::Subscript(s) => s.ctx = ExprContext::Load,
        _ => {}
    }
    expr
}

impl Transformer for Rewriter {
    fn visit_stmt(&self, stmt: &mut Stmt) {
        transformer::walk_stmt(self, stmt);
        let Stmt::AugAssign(aug) = stmt else {
            return;
        };
        let Some(guard) = augassign_guard(aug.op) else {
            return;
        };
        if !matches!(
            *aug.target,
            Expr::Name(_) | Expr::Attribute(_) | Expr::Subscript(_)
        ) {
            return;
        }
        let range = aug.range;
        let current = as_load(&aug.target);
        let value = std::mem::replace(&mut *aug.value, placeholder());
        let target = std::mem::replace(&mut *aug.target, placeholder());
        *stmt = Stmt::Assign(ast::StmtAssign {
            node_index: Default::default(),
            range,
            targets: vec![target],
            value: Box::new(call(guard, vec![current, value], range)),
        });
    }

    fn visit_expr(&self, expr: &mut Expr) {
        transformer::walk_expr(self, expr);
        match expr {
            Expr::BinOp(binop) => {
                if let Some(guard) = binop_guard(binop.op) {
                    let range = binop.range;
                    let left = std::mem::replace(&mut *binop.left, placeholder());
                    let right = std::mem::replace(&mut *binop.right, placeholder());
                    *expr = call(guard, vec![left, right], range);
                }
            }
            Expr::Attribute(attribute) if attribute.ctx == ExprContext::Load => {
                if let Some(guard) = attribute_guard(attribute.attr.id.as_str()) {
                    let range = attribute.range;
                    let value = std::mem::replace(&mut *attribute.value, placeholder());
                    *expr = call(guard, vec![value], range);
                }
            }
            _ => {}
        }
    }

    fn visit_interpolated_string_element(&self, element: &mut InterpolatedStringElement) {
        transformer::walk_interpolated_string_element(self, element);
        if let InterpolatedStringElement::Interpolation(field) = element
            && let Some(spec) = &mut field.format_spec
        {
            for nested in spec.elements.iter_mut() {
                if let InterpolatedStringElement::Interpolation(inner) = nested {
                    let range = inner.expression.range();
                    let value = std::mem::replace(&mut *inner.expression, placeholder());
                    *inner.expression = call("_weft_spec", vec![value], range);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_one_based() {
        let index = LineIndex::new("a\nbb\n\nc");
        assert_eq!(index.line(TextSize::new(0)), 1);
        assert_eq!(index.line(TextSize::new(1)), 1);
        assert_eq!(index.line(TextSize::new(2)), 2);
        assert_eq!(index.line(TextSize::new(5)), 3);
        assert_eq!(index.line(TextSize::new(6)), 4);
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("first_name"));
        assert!(is_identifier("type"));
        assert!(is_identifier("match"));
        assert!(!is_identifier("class"));
        assert!(!is_identifier("None"));
        assert!(!is_identifier("a b"));
        assert!(!is_identifier("a.b"));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier(""));
        assert!(!is_identifier(" a"));
        assert!(is_identifier("größe"));
        assert!(!is_identifier(&"(".repeat(100_000)));
        assert!(!is_identifier(&format!("{}a", "-".repeat(100_000))));
    }

    #[test]
    fn digit_runs() {
        assert_eq!(longest_digit_run(">10.2f"), 2);
        assert_eq!(longest_digit_run("0>100000"), 6);
        assert_eq!(longest_digit_run(""), 0);
    }
}
