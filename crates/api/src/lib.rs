//! What every host of Weft calls: the `weft` command, the desktop app, `weft serve` and `weft
//! restate` are adapters that translate their arguments into these calls and print, serialize
//! or send what comes back. Everything a host would otherwise decide for itself lives here once:
//!
//! - where the run store is and how it is opened ([`StoreLocation`]);
//! - who decides ([`decider`]);
//! - the duties of a process that lives on: approvals whose deadline passed, runs whose process
//!   died ([`Keeper`]);
//! - starting, deciding, continuing, retrying, cancelling and pausing runs, each with one policy
//!   and one refusal, whatever the host ([`Weft`]'s actions, [`Error`]);
//! - runs driven by another host (a Restate workflow), reached through a [`RunHost`];
//! - what runs did, as typed views that every host serializes the same way ([`views`]).

mod actions;
pub mod approvals;
mod asked;
mod decider;
mod error;
mod hosts;
mod keeper;
mod location;
pub mod people;
pub mod schedules;
pub mod tools;
pub mod versions;
pub mod views;

use std::sync::Arc;

use weft_engine::Engine;
use weft_history::cost::Prices;
use weft_providers::{LlmClients, ProviderSettings};
use weft_store::{Store, WriterStart};

pub use actions::{Cancelled, RunFrom, StartRequest, check_start};
pub use approvals::{ApprovalProgress, Channel, Decided, FollowedUp};
pub use asked::Asked;
pub use decider::{USER_ENV, decider, decider_from};
pub use error::{Error, ErrorKind};
pub use hosts::{HostedAction, RunHost};
pub use keeper::Keeper;
pub use location::{STORE_ENV, StoreLocation};
pub use people::{People, Person};
pub use weft_engine::breakpoints::Breakpoint;
pub use weft_engine::pins::Pins;
pub use weft_engine::{Continue, ResumeOptions, RunHandle, Waiting};

/// One process's Weft: its run store, its engine (providers, the runs going here), the price
/// table views are costed at, and the hosts it can hand answers to. Cheap to clone; clones
/// share the runs going.
#[derive(Clone)]
pub struct Weft {
    engine: Engine,
    location: StoreLocation,
    prices: Prices,
    hosts: hosts::Hosts,
    /// Who may decide approvals that name their approvers.
    people: Arc<People>,
    /// What the host does with a reminder or an escalation besides keeping it.
    follow_up_listener: Option<approvals::FollowUpListener>,
}

/// `engine`, exporting its runs' traces when this process set an exporter up
/// ([`weft_otel::init`]), with their LLM calls costed at `prices`.
fn traced(engine: Engine, prices: &Prices) -> Engine {
    match weft_otel::installed() {
        Some(telemetry) => engine.with_tracer(telemetry.tracer(prices)),
        None => engine,
    }
}

/// How long a process expects to live, which decides what it starts at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// A command that may end in a moment (`weft run`, `weft show`): the store's writer thread
    /// starts only when a run waits on something.
    Command,
    /// The app or a server: everything starts at once.
    Service,
}

impl Weft {
    /// Opens the run store at `location` and makes an engine over it with `providers`; prices
    /// are the shipped ones until [`Weft::with_prices`].
    pub fn open(
        location: StoreLocation,
        lifetime: Lifetime,
        providers: ProviderSettings,
    ) -> Result<Weft, Error> {
        let start = match lifetime {
            Lifetime::Command => WriterStart::OnDemand,
            Lifetime::Service => WriterStart::AtOpen,
        };
        let store = location.open(start)?;
        Ok(Weft::over(
            Engine::new(LlmClients::new(providers), store),
            location,
        ))
    }

    /// A Weft over an engine made elsewhere (a test's, a Restate worker's) whose store is at
    /// `location`.
    pub fn over(engine: Engine, location: StoreLocation) -> Weft {
        let prices = Prices::shipped();
        Weft {
            engine: traced(engine, &prices).with_pricer(pricer(prices.clone())),
            location,
            prices,
            hosts: hosts::Hosts::default(),
            people: Arc::new(People::default()),
            follow_up_listener: None,
        }
    }

    /// The same Weft, costing runs at `prices` (in views, and against budgets).
    pub fn with_prices(mut self, prices: Prices) -> Weft {
        self.engine = traced(self.engine, &prices).with_pricer(pricer(prices.clone()));
        self.prices = prices;
        self
    }

    /// The same Weft, its runs' MCP servers connected through `hub` (which reads `${NAME}`s
    /// the host's way).
    pub fn with_mcp(mut self, hub: Arc<weft_mcp::Hub>) -> Weft {
        self.engine = self.engine.with_mcp(hub);
        self
    }

    /// The same Weft, its approvals decided by `people` (who is in which group).
    pub fn with_people(mut self, people: People) -> Weft {
        self.people = Arc::new(people);
        self
    }

    /// The same Weft, telling `listener` of each reminder and escalation its keeper does (the
    /// app notifies the desktop).
    pub fn on_follow_up(mut self, listener: approvals::FollowUpListener) -> Weft {
        self.follow_up_listener = Some(listener);
        self
    }

    /// The people approvals are decided by.
    pub fn people(&self) -> &People {
        &self.people
    }

    /// The same Weft, handing answers for the runs `host` drives to it.
    pub fn with_host(mut self, host: Arc<dyn RunHost>) -> Weft {
        self.hosts.add(host);
        self
    }

    /// The same Weft with other providers (new settings); runs going keep theirs and stay
    /// known to both.
    pub fn with_providers(&self, providers: ProviderSettings) -> Weft {
        Weft {
            engine: self.engine.with_llm(LlmClients::new(providers)),
            ..self.clone()
        }
    }

    /// The same Weft, whose process ends once its runs end (`weft run`): see
    /// [`Engine::ending_with_process`].
    pub fn ending_with_process(mut self) -> Weft {
        self.engine = self.engine.ending_with_process();
        self
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn store(&self) -> &Store {
        self.engine.store()
    }

    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    pub fn prices(&self) -> &Prices {
        &self.prices
    }
}

/// `prices` as the engine costs answers against a run's budget.
fn pricer(prices: Prices) -> weft_engine::Pricer {
    Arc::new(move |model: &str, usage| prices.price(model).map(|price| price.of(usage)))
}
