//! The people who decide approvals: each with a name (what they are known by when they
//! decide: a token's name, the app's user, `--by`), an email address and groups, read from a
//! people file (`--people FILE`, `WEFT_PEOPLE_FILE`) or the app's Settings.
//!
//! A people file has one person a line, `NAME EMAIL GROUP...`, `-` for no email, `#` comments:
//!
//! ```text
//! # name   email               groups
//! ada      ada@example.com     finance ops
//! grace    grace@example.com   finance
//! linus    -
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The environment variable naming the people file, for hosts not given `--people`.
pub const PEOPLE_ENV: &str = "WEFT_PEOPLE_FILE";

/// A people file larger than this is refused (it is read whole).
const MAX_PEOPLE_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// One person who may decide approvals.
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Person {
    /// What they are known by when they decide.
    pub name: String,
    /// Where approvals by email reach them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// The groups an approval names as `group:NAME`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// Everybody who may decide, by name. Empty when no people file is set: then approvals that
/// name groups cannot be decided, and names are taken as they are given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct People {
    by_name: BTreeMap<String, Person>,
    /// Where they were read from, named in messages.
    source: Option<String>,
}

impl People {
    /// Reads a people file, refusing one that does not parse (naming the line).
    pub fn load(path: &Path) -> Result<People, Error> {
        let shown = path.display().to_string();
        let metadata = std::fs::metadata(path)
            .map_err(|error| Error::invalid(format!("cannot read people file {shown}: {error}")))?;
        if !metadata.is_file() {
            return Err(Error::invalid(format!(
                "people file {shown} is not a regular file"
            )));
        }
        if metadata.len() > MAX_PEOPLE_FILE_BYTES {
            return Err(Error::invalid(format!(
                "people file {shown} is larger than {} MiB",
                MAX_PEOPLE_FILE_BYTES / (1024 * 1024)
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|error| Error::invalid(format!("cannot read people file {shown}: {error}")))?;
        People::parse(&text, &shown).map_err(Error::invalid)
    }

    /// The people file given (`--people`), else the one `WEFT_PEOPLE_FILE` names, else nobody.
    pub fn from_file_or_env(given: Option<&Path>) -> Result<People, Error> {
        match given {
            Some(path) => People::load(path),
            None => match std::env::var_os(PEOPLE_ENV).filter(|value| !value.is_empty()) {
                Some(path) => People::load(Path::new(&path)),
                None => Ok(People::default()),
            },
        }
    }

    /// Reads a people file's text; `source` names it in messages.
    pub fn parse(text: &str, source: &str) -> Result<People, String> {
        let mut people = Vec::new();
        let mut lines_of: BTreeMap<String, usize> = BTreeMap::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let line = line.split('#').next().unwrap_or_default().trim();
            if line.is_empty() {
                continue;
            }
            let at = |problem: String| format!("{source} line {number}: {problem}");
            let mut words = line.split_whitespace();
            let name = words.next().unwrap_or_default().to_string();
            let email = match words.next() {
                None | Some("-") => None,
                Some(email) if email.contains('@') => Some(email.to_string()),
                Some(other) => {
                    return Err(at(format!(
                        "`{other}` is not an email address (write - for none): a line is NAME EMAIL GROUP..."
                    )));
                }
            };
            let groups: Vec<String> = words
                .flat_map(|word| word.split(','))
                .filter(|group| !group.is_empty())
                .map(str::to_string)
                .collect();
            let person = Person {
                name,
                email,
                groups,
            };
            check_person(&person).map_err(at)?;
            if let Some(first) = lines_of.insert(person.name.clone(), number) {
                return Err(at(format!(
                    "`{}` is named twice (first on line {first})",
                    person.name
                )));
            }
            people.push(person);
        }
        Ok(People {
            by_name: people
                .into_iter()
                .map(|person| (person.name.clone(), person))
                .collect(),
            source: Some(source.to_string()),
        })
    }

    /// The people of a list (the app's Settings), refusing a blank or repeated name.
    pub fn from_list(list: Vec<Person>, source: &str) -> Result<People, String> {
        let mut by_name = BTreeMap::new();
        for (index, person) in list.into_iter().enumerate() {
            let at = |problem: String| format!("{source}, person {}: {problem}", index + 1);
            check_person(&person).map_err(at)?;
            let name = person.name.clone();
            if by_name.insert(name.clone(), person).is_some() {
                return Err(at(format!("`{name}` is named twice")));
            }
        }
        Ok(People {
            by_name,
            source: Some(source.to_string()),
        })
    }

    /// Whether no people are known (no people file, or an empty one).
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Where the people were read from, as messages name it.
    pub fn source(&self) -> &str {
        self.source.as_deref().unwrap_or("no people file")
    }

    pub fn get(&self, name: &str) -> Option<&Person> {
        self.by_name.get(name)
    }

    /// Everybody, in name order.
    pub fn all(&self) -> impl Iterator<Item = &Person> {
        self.by_name.values()
    }

    /// The members of `group`, in name order.
    pub fn members<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a Person> + 'a {
        self.by_name
            .values()
            .filter(move |person| person.groups.iter().any(|name| name == group))
    }

    /// Whether `name` is in `group`.
    pub fn in_group(&self, name: &str, group: &str) -> bool {
        self.get(name)
            .is_some_and(|person| person.groups.iter().any(|member_of| member_of == group))
    }
}

/// A name has no spaces and no `:` (a tokens file separates a token's name from it by `:`, and
/// `group:` starts a group in `approvers`).
fn check_person(person: &Person) -> Result<(), String> {
    let name = person.name.trim();
    if name.is_empty() {
        return Err("a person needs a name".into());
    }
    if name.contains(':') || name.chars().any(char::is_whitespace) {
        return Err(format!(
            "`{name}` cannot be a name: a name has no spaces and no `:`"
        ));
    }
    if let Some(email) = &person.email
        && !email.contains('@')
    {
        return Err(format!("`{email}` is not an email address"));
    }
    if let Some(group) = person
        .groups
        .iter()
        .find(|group| group.is_empty() || group.contains(':'))
    {
        return Err(format!("`{group}` cannot be a group: a group has no `:`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_people_file_gives_names_emails_and_groups() {
        let people = People::parse(
            "# name email groups\nada ada@example.com finance,ops\n\ngrace grace@example.com finance # lead\nlinus -\n",
            "people.txt",
        )
        .expect("parses");
        assert_eq!(
            people.get("ada").map(|ada| ada.groups.clone()),
            Some(vec!["finance".to_string(), "ops".to_string()])
        );
        assert_eq!(
            people
                .members("finance")
                .map(|person| person.name.as_str())
                .collect::<Vec<_>>(),
            ["ada", "grace"]
        );
        assert_eq!(
            people.get("linus").and_then(|linus| linus.email.clone()),
            None
        );
        assert!(people.in_group("grace", "finance"));
        assert!(!people.in_group("linus", "finance"));
    }

    #[test]
    fn a_people_file_that_does_not_parse_names_the_line() {
        let error = People::parse("ada ada@example.com\nbob finance\n", "people.txt")
            .expect_err("no email on line 2");
        assert!(
            error.starts_with("people.txt line 2: `finance` is not an email address"),
            "{error}"
        );
        let error = People::parse("ada -\n\nada - ops\n", "people.txt").expect_err("twice");
        assert_eq!(
            error,
            "people.txt line 3: `ada` is named twice (first on line 1)"
        );
        let error = People::parse("ops:ada -\n", "p").expect_err("a colon");
        assert!(
            error.contains("line 1") && error.contains("no `:`"),
            "{error}"
        );
    }
}
