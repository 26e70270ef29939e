//! The order of a config type's fields as declared, asked of serde: JSON Schema objects (and
//! so the schemas schemars derives) keep properties sorted by name, but a person reads a kind's
//! fields in the order its author wrote them.
//!
//! A probing deserializer walks `T::deserialize` without any data: each struct reports its
//! field names (already as spelled in files) when serde asks for it, and the probe then walks
//! into each field's value, so nested structs (`tools`, `retry`) report theirs too. Leaf
//! values get plausible empty values; where a type refuses one, the walk of that struct stops
//! early, but its own field list is already known.

use std::collections::HashMap;

use serde::de::{self, DeserializeOwned, Deserializer, IntoDeserializer, Visitor};

/// Field names in declaration order, by the dotted path of the struct they belong to (`""`
/// for the top level, `tools` for `AgentTools`).
pub(super) fn field_order<T: DeserializeOwned>() -> HashMap<String, Vec<&'static str>> {
    let mut order = HashMap::new();
    // The probe ends in a refusal somewhere; what it noted on the way is the answer.
    let _refused = T::deserialize(Probe {
        path: String::new(),
        order: &mut order,
    });
    order
}

/// Answers each `deserialize_<number>` with a zero of a type its visitor accepts.
macro_rules! zero {
    ($($method:ident)* => $visit:ident($value:expr)) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
                visitor.$visit($value)
            }
        )*
    };
}

struct Probe<'a> {
    path: String,
    order: &'a mut HashMap<String, Vec<&'static str>>,
}

type Refusal = de::value::Error;

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Refusal;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_unit()
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_bool(false)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_i64(0)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_u64(0)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_f64(0.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_str("")
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_some(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_seq(de::value::SeqDeserializer::<_, Refusal>::new(
            std::iter::empty::<()>(),
        ))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Refusal> {
        visitor.visit_map(de::value::MapDeserializer::<_, Refusal>::new(
            std::iter::empty::<((), ())>(),
        ))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        let first = variants.first().copied().unwrap_or("");
        visitor.visit_enum(first.into_deserializer())
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        self.order.insert(self.path.clone(), fields.to_vec());
        visitor.visit_map(Fields {
            path: self.path,
            order: self.order,
            fields: fields.iter(),
        })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Refusal> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        char bytes byte_buf unit unit_struct tuple tuple_struct identifier ignored_any
    }

    zero! { deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i128 => visit_i64(0) }
    zero! { deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u128 => visit_u64(0) }
    zero! { deserialize_f32 => visit_f64(0.0) }
}

/// A struct's fields, each with a probe for its value.
struct Fields<'a> {
    path: String,
    order: &'a mut HashMap<String, Vec<&'static str>>,
    fields: std::slice::Iter<'static, &'static str>,
}

impl<'de> de::MapAccess<'de> for Fields<'_> {
    type Error = Refusal;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Refusal> {
        match self.fields.as_slice().first() {
            Some(field) => seed.deserialize(field.into_deserializer()).map(Some),
            None => Ok(None),
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Refusal> {
        let field = self.fields.next().copied().unwrap_or("");
        let path = if self.path.is_empty() {
            field.to_string()
        } else {
            format!("{}.{field}", self.path)
        };
        seed.deserialize(Probe {
            path,
            order: self.order,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)] // only deserialized, to ask for its shape
    struct Outer {
        zeta: String,
        inner: Option<Inner>,
        alpha: bool,
        choice: Option<Choice>,
        count: u32,
    }

    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    #[allow(dead_code)]
    struct Inner {
        second_field: f64,
        first_field: Vec<String>,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    enum Choice {
        B,
        A,
    }

    #[test]
    fn fields_come_in_declaration_order_at_every_level() {
        let order = field_order::<Outer>();
        assert_eq!(order[""], ["zeta", "inner", "alpha", "choice", "count"]);
        assert_eq!(order["inner"], ["secondField", "firstField"]);
    }
}
