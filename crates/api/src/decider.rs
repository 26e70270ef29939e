//! Who decides: the name kept with each decision, found the same way on every host.

/// The environment variable that names the person deciding on this machine.
pub const USER_ENV: &str = "WEFT_USER";

/// The name kept with a decision: `given` (`--by`, the app's Settings, a token's name), else
/// `WEFT_USER`, else the login name; `None` when nothing names anybody.
pub fn decider(given: Option<&str>) -> Option<String> {
    decider_from(given, |name| std::env::var(name).ok())
}

/// [`decider`], with the environment read through `env`.
pub fn decider_from(given: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Option<String> {
    given
        .map(str::to_string)
        .filter(|name| !name.trim().is_empty())
        .or_else(|| env(USER_ENV))
        .filter(|name| !name.trim().is_empty())
        .or_else(|| env("USER"))
        .filter(|name| !name.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_given_name_then_weft_user_then_the_login_name() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| value.to_string())
            }
        };
        let both: &[(&str, &str)] = &[("WEFT_USER", "ada"), ("USER", "root")];
        assert_eq!(
            decider_from(Some("grace"), env(both)).as_deref(),
            Some("grace")
        );
        assert_eq!(decider_from(Some("  "), env(both)).as_deref(), Some("ada"));
        assert_eq!(
            decider_from(None, env(&[("USER", "root")])).as_deref(),
            Some("root")
        );
        assert_eq!(decider_from(None, env(&[("WEFT_USER", "")])), None);
    }
}
