//! Dotted paths into JSON values (`verdict`, `scores.0`, `data.rows`): how `if` conditions,
//! `forEach` items, templates' error messages and field descriptions address a part of a value.
//! Object keys are taken as written; a segment that is a whole number indexes an array.

use serde_json::{Map, Value};

/// The value at `path` in `value` (`""` is the value itself).
pub fn get<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    resolve(value, path).ok()
}

/// The value at `path` in the object `map`.
pub fn get_in<'v>(map: &'v Map<String, Value>, path: &str) -> Option<&'v Value> {
    let (head, rest) = path.split_once('.').unwrap_or((path, ""));
    get(map.get(head)?, rest)
}

/// The value at `path`, or the number of segments that did resolve before one did not (so a
/// message can name the first missing part).
pub fn resolve<'v>(value: &'v Value, path: &str) -> Result<&'v Value, usize> {
    if path.is_empty() {
        return Ok(value);
    }
    let mut current = value;
    for (resolved, segment) in path.split('.').enumerate() {
        let next = match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment
                .parse::<usize>()
                .ok()
                .and_then(|index| items.get(index)),
            _ => None,
        };
        current = next.ok_or(resolved)?;
    }
    Ok(current)
}

/// Sets `path` in `map` to `value`, making the objects on the way (replacing what is not one).
pub fn set_in(map: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        Some((head, rest)) => {
            let inner = map.entry(head).or_insert_with(|| Value::Object(Map::new()));
            if !inner.is_object() {
                *inner = Value::Object(Map::new());
            }
            if let Value::Object(inner) = inner {
                set_in(inner, rest, value);
            }
        }
        None => {
            map.insert(path.to_string(), value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_walk_objects_and_arrays() {
        let value = json!({"a": {"b": [10, {"c": "x"}]}, "n": 1});
        assert_eq!(get(&value, "a.b.0"), Some(&json!(10)));
        assert_eq!(get(&value, "a.b.1.c"), Some(&json!("x")));
        assert_eq!(get(&value, ""), Some(&value));
        assert_eq!(get(&value, "a.b.7"), None);
        assert_eq!(get(&value, "n.x"), None);
        assert_eq!(resolve(&value, "a.nope.c"), Err(1));
        assert_eq!(resolve(&value, "zz"), Err(0));
        let map = value.as_object().expect("object");
        assert_eq!(get_in(map, "a.b.1.c"), Some(&json!("x")));
        assert_eq!(get_in(map, "n"), Some(&json!(1)));
    }

    #[test]
    fn set_makes_the_objects_on_the_way() {
        let mut map = Map::new();
        set_in(&mut map, "retry.maxAttempts", json!(3));
        set_in(&mut map, "label", json!("x"));
        assert_eq!(
            Value::Object(map),
            json!({"retry": {"maxAttempts": 3}, "label": "x"})
        );
    }
}
