//! The macro behind the one list of node kinds in `nodes/mod.rs`. From one line per kind
//! (`Agent => agent::AgentConfig`) it declares the kind's module and makes:
//! - [`NodeKind`](super::NodeKind), the kinds as an enum, with its id, title, scheduling,
//!   handles and description read from the kind's [`Kind`](super::Kind) implementation;
//! - [`NodeConfig`](super::NodeConfig), a node's `data` parsed for its kind, with the dispatch
//!   of checks, the model and child flow a node uses, and `run`.
//!
//! Every `match` it writes names every kind, so nothing can be forgotten.

macro_rules! kinds {
    ($(
        $(#[cfg($cfg:meta)])?
        $(#[path = $path:literal])?
        $variant:ident => $module:ident :: $config:ident
    ),* $(,)?) => {
        $(
            $(#[cfg($cfg)])?
            $(#[path = $path])?
            mod $module;
            $(#[cfg($cfg)])?
            pub use $module::$config;
        )*

        /// Every node type Weft knows. Files spell it as its id (`forEach`); see [`NodeKind::id`].
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum NodeKind {
            $( $(#[cfg($cfg)])? $variant, )*
        }

        /// A node's `data`, parsed for its kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum NodeConfig {
            $( $(#[cfg($cfg)])? $variant($config), )*
        }

        impl NodeKind {
            /// Every kind, in registry order.
            // Pushed one by one (not `vec![..]`) so that a kind may be `#[cfg]`'d out.
            #[allow(clippy::vec_init_then_push)]
            pub fn all() -> &'static [NodeKind] {
                static ALL: std::sync::OnceLock<Vec<NodeKind>> = std::sync::OnceLock::new();
                ALL.get_or_init(|| {
                    let mut all = Vec::new();
                    $( $(#[cfg($cfg)])? all.push(NodeKind::$variant); )*
                    all
                })
            }

            /// Position in [`NodeKind::all`].
            pub(crate) fn index(self) -> usize {
                // Registry order is declaration order, so the discriminant is the position.
                self as usize
            }

            /// The `type` id in flow files.
            pub fn id(self) -> &'static str {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::ID, )*
                }
            }

            pub fn from_id(id: &str) -> Option<NodeKind> {
                $(
                    $(#[cfg($cfg)])?
                    if id == <$config as $crate::Kind>::ID {
                        return Some(NodeKind::$variant);
                    }
                )*
                None
            }

            /// The kind's name as a person reads it.
            pub fn title(self) -> &'static str {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::TITLE, )*
                }
            }

            pub fn scheduling(self) -> $crate::Scheduling {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::SCHEDULING, )*
                }
            }

            /// Whether a node of this kind takes incoming edges.
            pub fn has_input(self) -> bool {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::INPUTS, )*
                }
            }

            /// The handles as the kind declares them (a repeated one once, as its pattern).
            pub fn handle_list(self) -> &'static [$crate::Handle] {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::HANDLES, )*
                }
            }

            /// Seconds one attempt may take when a node does not set `timeoutSeconds`.
            pub fn default_timeout_seconds(self) -> f64 {
                match self {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => <$config as $crate::Kind>::DEFAULT_TIMEOUT_SECONDS, )*
                }
            }

            /// What a canvas needs to draw this kind and edit its `data` (derived once per
            /// kind, when first asked: deriving one means building its JSON Schema, and a
            /// flow of two kinds should not pay for all of them).
            pub fn describe(self) -> &'static $crate::KindDescription {
                static DESCRIPTIONS: std::sync::OnceLock<Vec<std::sync::OnceLock<$crate::KindDescription>>> =
                    std::sync::OnceLock::new();
                DESCRIPTIONS
                    .get_or_init(|| NodeKind::all().iter().map(|_| std::sync::OnceLock::new()).collect())
                    [self.index()]
                    .get_or_init(|| match self {
                        $( $(#[cfg($cfg)])? NodeKind::$variant => $crate::describe::describe::<$config>(), )*
                    })
            }

            /// Hints for required fields left empty, by field name (derived once per kind).
            fn empty_hints(self) -> &'static [(String, String)] {
                static HINTS: std::sync::OnceLock<Vec<std::sync::OnceLock<Vec<(String, String)>>>> =
                    std::sync::OnceLock::new();
                HINTS
                    .get_or_init(|| NodeKind::all().iter().map(|_| std::sync::OnceLock::new()).collect())
                    [self.index()]
                    .get_or_init(|| match self {
                        $( $(#[cfg($cfg)])? NodeKind::$variant => $crate::describe::empty_hints::<$config>(), )*
                    })
            }
        }

        impl serde::Serialize for NodeKind {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.id())
            }
        }

        impl std::fmt::Display for NodeKind {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.id())
            }
        }

        impl NodeConfig {
            /// Parses `data` for `kind`: field types, the described ranges and required
            /// fields, then the kind's own checks. The error names the field.
            pub fn parse(
                kind: NodeKind,
                data: &serde_json::Map<String, serde_json::Value>,
            ) -> Result<NodeConfig, $crate::FieldError> {
                let config = match kind {
                    $( $(#[cfg($cfg)])? NodeKind::$variant => NodeConfig::$variant(parse_fields(data)?), )*
                };
                $crate::describe::check_fields(&kind.describe().fields, kind.empty_hints(), data)?;
                match &config {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => $crate::Kind::check(config)?, )*
                }
                Ok(config)
            }

            pub fn kind(&self) -> NodeKind {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(_) => NodeKind::$variant, )*
                }
            }

            /// The model this node calls, if it calls one.
            pub fn model(&self) -> Option<$crate::ModelUse<'_>> {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => $crate::Kind::model(config), )*
                }
            }

            /// The source of template field `field` as parsed ([`Kind::template`]).
            pub fn template(&self, field: &str) -> Option<&str> {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => $crate::Kind::template(config, field), )*
                }
            }

            /// The flow file this node runs, if it runs one.
            pub fn child_flow(&self) -> Option<$crate::ChildFlowUse<'_>> {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => $crate::Kind::child_flow(config), )*
                }
            }

            fn inner_any(&self) -> &dyn std::any::Any {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => config, )*
                }
            }

            /// Runs one step of a kind that does not wait ([`Scheduling::Instant`],
            /// [`Scheduling::Pause`], [`Scheduling::Join`]) to its end at once, polling the kind's
            /// own future (not the larger one of [`NodeConfig::run`]); `None` for a kind that
            /// waits, or for one whose future was not ready after all.
            pub fn run_now(
                &self,
                step: &$crate::step::Step<'_>,
                env: &dyn $crate::step::StepEnv,
            ) -> Option<Result<$crate::step::StepOutput, $crate::step::StepError>> {
                use futures_util::FutureExt as _;
                use $crate::{Kind, Scheduling};
                match self {
                    $(
                        $(#[cfg($cfg)])?
                        NodeConfig::$variant(config) => match <$config as Kind>::SCHEDULING {
                            Scheduling::Task | Scheduling::Never => None,
                            Scheduling::Instant | Scheduling::Pause | Scheduling::Join => {
                                Kind::run(config, step, env).now_or_never()
                            }
                        },
                    )*
                }
            }

            /// Runs one step of this node: its kind's `run`.
            pub async fn run(
                &self,
                step: &$crate::step::Step<'_>,
                env: &dyn $crate::step::StepEnv,
            ) -> Result<$crate::step::StepOutput, $crate::step::StepError> {
                match self {
                    $( $(#[cfg($cfg)])? NodeConfig::$variant(config) => $crate::Kind::run(config, step, env).await, )*
                }
            }
        }
    };
}

pub(super) use kinds;
