//! What the property tests of every crate share (each crate keeps its own hostile values and
//! how often each change is made): how many cases from which seed, and changes to a JSON
//! document at a place picked at random.
//!
//! The test command runs a fixed number of cases from a fixed seed; `scripts/fuzz.sh` runs many
//! more from random seeds (`WEFT_FUZZ_CASES`, `WEFT_FUZZ_SEED=random`).

use proptest::prelude::ProptestConfig;
use proptest::sample::Index;
use proptest::test_runner::RngSeed;
use serde_json::Value;

/// `cases` cases from the seed of `WEFT_FUZZ_SEED` (a number, or `random`), else a fixed one;
/// `WEFT_FUZZ_CASES` overrides the count.
pub fn config(cases: u32) -> ProptestConfig {
    let variable = |name| std::env::var(name).ok();
    let rng_seed = match variable("WEFT_FUZZ_SEED").as_deref() {
        Some("random") => RngSeed::Random,
        Some(seed) => RngSeed::Fixed(seed.parse().expect("WEFT_FUZZ_SEED is a number")),
        None => RngSeed::Fixed(0x7e57_f11e),
    };
    ProptestConfig {
        cases: variable("WEFT_FUZZ_CASES").map_or(cases, |n| n.parse().expect("a count")),
        rng_seed,
        ..ProptestConfig::default()
    }
}

/// One change to a JSON document, at places picked at random among all of its values.
#[derive(Debug, Clone)]
pub enum Change {
    /// Replace the value at the place.
    Replace(Index, Value),
    /// Remove the place from its object or array.
    Remove(Index),
    /// Give the place's key another name (nothing when the place is no object's field).
    Rename(Index, String),
    /// Copy one place over another (a node into an edge, an id into a handle...).
    Copy(Index, Index),
    /// Wrap the place's value in arrays, this many deep.
    Nest(Index, usize),
}

/// A step from a value to one inside it.
#[derive(Debug, Clone, PartialEq)]
enum PathPart {
    Key(String),
    At(usize),
}

/// The paths (keys and indexes from the root) of every value in `value`, in pre-order.
fn places(value: &Value) -> Vec<Vec<PathPart>> {
    fn walk(value: &Value, path: &mut Vec<PathPart>, out: &mut Vec<Vec<PathPart>>) {
        out.push(path.clone());
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    path.push(PathPart::Key(key.clone()));
                    walk(child, path, out);
                    path.pop();
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    path.push(PathPart::At(index));
                    walk(child, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(value, &mut Vec::new(), &mut out);
    out
}

fn get_mut<'a>(value: &'a mut Value, path: &[PathPart]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |current, part| match part {
        PathPart::Key(key) => current.get_mut(key.as_str()),
        PathPart::At(index) => current.get_mut(*index),
    })
}

/// Makes `change` to `value`.
pub fn apply(value: &mut Value, change: &Change) {
    let places = places(value);
    let pick = |index: &Index| places[index.index(places.len())].clone();
    match change {
        Change::Replace(at, replacement) => {
            if let Some(target) = get_mut(value, &pick(at)) {
                *target = replacement.clone();
            }
        }
        Change::Remove(at) => {
            let path = pick(at);
            let Some((last, parent)) = path.split_last() else {
                return;
            };
            match (get_mut(value, parent), last) {
                (Some(Value::Object(map)), PathPart::Key(key)) => {
                    map.remove(key);
                }
                (Some(Value::Array(items)), PathPart::At(index)) if *index < items.len() => {
                    items.remove(*index);
                }
                _ => {}
            }
        }
        Change::Rename(at, new) => {
            let path = pick(at);
            if let Some((PathPart::Key(old), parent)) = path.split_last()
                && let Some(Value::Object(map)) = get_mut(value, parent)
                && let Some(child) = map.remove(old)
            {
                map.insert(new.clone(), child);
            }
        }
        Change::Copy(from, to) => {
            let copied = get_mut(value, &pick(from)).map(|source| source.clone());
            if let (Some(copied), Some(target)) = (copied, get_mut(value, &pick(to))) {
                *target = copied;
            }
        }
        Change::Nest(at, depth) => {
            if let Some(target) = get_mut(value, &pick(at)) {
                let mut nested = target.take();
                for _ in 0..*depth {
                    nested = Value::Array(vec![nested]);
                }
                *target = nested;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    proptest! {
        #![proptest_config(config(64))]

        #[test]
        fn changes_to_a_document_of_one_value_land_on_it(at in any::<Index>(), to in any::<Index>()) {
            let apply_to = |change: Change| {
                let mut value = json!(5);
                apply(&mut value, &change);
                value
            };
            prop_assert_eq!(apply_to(Change::Replace(at, json!("x"))), json!("x"));
            prop_assert_eq!(apply_to(Change::Nest(at, 2)), json!([[5]]));
            prop_assert_eq!(apply_to(Change::Copy(at, to)), json!(5));
            // The root is no field or item: nothing to remove or rename.
            prop_assert_eq!(apply_to(Change::Remove(at)), json!(5));
            prop_assert_eq!(apply_to(Change::Rename(at, "k".into())), json!(5));
        }

        #[test]
        fn a_change_anywhere_in_a_document_keeps_it_json(
            at in any::<Index>(),
            kind in 0usize..5,
        ) {
            let mut value = json!({"a": [1, {"b": 2}], "c": "x"});
            let change = match kind {
                0 => Change::Replace(at, json!(null)),
                1 => Change::Remove(at),
                2 => Change::Rename(at, "d".into()),
                3 => Change::Copy(at, at),
                _ => Change::Nest(at, 3),
            };
            apply(&mut value, &change);
            prop_assert!(serde_json::from_str::<Value>(&value.to_string()).is_ok());
        }
    }
}
