//! The app's own files in its config directory: provider settings (keys and addresses) and the
//! list of recently opened flows.
//!
//! Provider settings are stored under the environment variable names the `weft` command reads
//! (`OPENAI_API_KEY`, `OPENAI_BASE_URL`, ...), so one vocabulary serves both hosts; a value
//! not set in the app falls back to the environment. The file is written with mode 0600 and
//! keys never leave it except into provider requests: the canvas only learns whether a key
//! is set.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use weft_api::StoreLocation;
use weft_history::cost::Prices;
use weft_providers::{ProviderKind, ProviderSettings};

use crate::error::{AppError, ErrorCode};

/// Where the app keeps its files.
#[derive(Debug, Clone)]
pub struct AppPaths {
    pub config_dir: PathBuf,
    /// The run store: where every host looks (`WEFT_DB`, else the user's data directory).
    pub store: StoreLocation,
}

impl AppPaths {
    /// `WEFT_CONFIG_DIR` when set (tests, several profiles), else the user's config directory;
    /// the run store where `weft` finds it too.
    pub fn from_env() -> Result<AppPaths, AppError> {
        let config_dir = match std::env::var_os("WEFT_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => directories::ProjectDirs::from("", "", "weft")
                .map(|d| d.config_dir().to_path_buf())
                .ok_or_else(|| no_home("WEFT_CONFIG_DIR"))?,
        };
        Ok(AppPaths {
            config_dir,
            store: StoreLocation::find(None)?,
        })
    }

    pub fn settings_file(&self) -> PathBuf {
        self.config_dir.join("settings.json")
    }

    pub fn recent_file(&self) -> PathBuf {
        self.config_dir.join("recent.json")
    }
}

fn no_home(variable: &str) -> AppError {
    AppError::new(
        ErrorCode::Settings,
        format!("cannot find the user's home directories; set {variable}"),
    )
}

/// A provider setting, named by its environment variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Setting {
    OpenAiKey,
    OpenAiBaseUrl,
    AnthropicKey,
    AnthropicBaseUrl,
    OllamaHost,
    DefaultModel,
    /// The person's name, recorded with each decision they take.
    UserName,
}

impl Setting {
    pub const ALL: [Setting; 7] = [
        Setting::OpenAiKey,
        Setting::OpenAiBaseUrl,
        Setting::AnthropicKey,
        Setting::AnthropicBaseUrl,
        Setting::OllamaHost,
        Setting::DefaultModel,
        Setting::UserName,
    ];

    pub fn variable(self) -> &'static str {
        match self {
            Setting::OpenAiKey => "OPENAI_API_KEY",
            Setting::OpenAiBaseUrl => "OPENAI_BASE_URL",
            Setting::AnthropicKey => "ANTHROPIC_API_KEY",
            Setting::AnthropicBaseUrl => "ANTHROPIC_BASE_URL",
            Setting::OllamaHost => "OLLAMA_HOST",
            Setting::DefaultModel => "WEFT_DEFAULT_MODEL",
            Setting::UserName => "WEFT_USER",
        }
    }
}

/// The settings file's content.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SettingsFile {
    /// Values by environment variable name.
    #[serde(default)]
    pub values: BTreeMap<String, String>,
    /// Prices that add to or replace the shipped ones (and `WEFT_PRICES`'s), as in a
    /// `WEFT_PRICES` file: `{"openai/gpt-4o": {"input": 2.5, "output": 10}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<serde_json::Value>,
    /// MCP servers every flow may use, in the form of a flow's `settings.mcpServers`; a flow's
    /// own server of the same name wins.
    #[serde(
        default,
        rename = "mcpServers",
        skip_serializing_if = "Option::is_none"
    )]
    pub mcp_servers: Option<serde_json::Value>,
    /// Who may decide approvals that name approvers or groups, in the form of a people file
    /// (`NAME EMAIL GROUP...` a line); without it, the file `WEFT_PEOPLE_FILE` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub people: Option<String>,
    /// The `weft serve`s this app connects to (Settings → Servers), their tokens with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<crate::servers::ServerEntry>,
}

/// How messages name the people typed in Settings.
const PEOPLE_SOURCE: &str = "Settings → People";

impl SettingsFile {
    /// Reads the file; a missing file is empty settings, a broken one an error naming it.
    pub fn load(path: &Path) -> Result<SettingsFile, AppError> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                AppError::new(
                    ErrorCode::Settings,
                    format!("the settings file {} is not valid: {e}", path.display()),
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SettingsFile::default()),
            Err(e) => Err(AppError::new(
                ErrorCode::Settings,
                format!("cannot read the settings file {}: {e}", path.display()),
            )),
        }
    }

    /// Writes the file readable by its owner only (it holds keys), replacing it atomically.
    pub fn save(&self, path: &Path) -> Result<(), AppError> {
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        write_private(path, text.as_bytes()).map_err(|e| {
            AppError::new(
                ErrorCode::Settings,
                format!("cannot write the settings file {}: {e}", path.display()),
            )
        })
    }

    pub fn get(&self, setting: Setting) -> Option<&str> {
        self.values
            .get(setting.variable())
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// Sets or (with an empty value) removes a setting.
    pub fn set(&mut self, setting: Setting, value: &str) {
        let value = value.trim();
        if value.is_empty() {
            self.values.remove(setting.variable());
        } else {
            self.values
                .insert(setting.variable().to_string(), value.to_string());
        }
    }

    /// Where price errors say the settings' prices come from.
    pub const PRICES_ORIGIN: &'static str = "Settings → Prices";

    /// Sets the price overrides from the text typed in Settings (empty: none), refused with
    /// the line and column of a syntax error or the model and field of a wrong price.
    pub fn set_prices(&mut self, text: &str) -> Result<(), AppError> {
        if text.trim().is_empty() {
            self.prices = None;
            return Ok(());
        }
        let refused = |message: String| AppError::new(ErrorCode::BadRequest, message);
        Prices::none()
            .with_text(text, std::path::Path::new(Self::PRICES_ORIGIN))
            .map_err(|error| refused(error.to_string()))?;
        let table = serde_json::from_str(text).map_err(|error| refused(error.to_string()))?;
        self.prices = Some(table);
        Ok(())
    }

    /// The price table: shipped, then the file `WEFT_PRICES` names, then these settings.
    pub fn prices(&self) -> Result<Prices, AppError> {
        let refused = |message: String| AppError::new(ErrorCode::BadRequest, message);
        let prices =
            Prices::from_env().map_err(|error| refused(format!("{error} (set by WEFT_PRICES)")))?;
        match &self.prices {
            Some(table) => prices
                .with_table(table, std::path::Path::new(Self::PRICES_ORIGIN))
                .map_err(|error| refused(error.to_string())),
            None => Ok(prices),
        }
    }

    /// Sets the MCP servers for every flow from the text typed in Settings (empty: none),
    /// refused with each problem named by its path, as in a flow file.
    pub fn set_mcp_servers(&mut self, text: &str) -> Result<(), AppError> {
        if text.trim().is_empty() {
            self.mcp_servers = None;
            return Ok(());
        }
        let refused = |message: String| AppError::new(ErrorCode::BadRequest, message);
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|error| refused(error.to_string()))?;
        weft_mcp::parse_servers(Some(&value)).map_err(|problems| refused(problems.join("; ")))?;
        self.mcp_servers = Some(value);
        Ok(())
    }

    /// Sets the people from the text typed in Settings (empty: none), refused naming the line
    /// that does not parse.
    pub fn set_people(&mut self, text: &str) -> Result<(), AppError> {
        if text.trim().is_empty() {
            self.people = None;
            return Ok(());
        }
        weft_api::People::parse(text, PEOPLE_SOURCE)
            .map_err(|message| AppError::new(ErrorCode::BadRequest, message))?;
        self.people = Some(text.to_string());
        Ok(())
    }

    /// The people approvals are decided by: Settings' own, else `WEFT_PEOPLE_FILE`'s.
    pub fn people(&self) -> Result<weft_api::People, AppError> {
        match &self.people {
            Some(text) => weft_api::People::parse(text, PEOPLE_SOURCE)
                .map_err(|message| AppError::new(ErrorCode::Settings, message)),
            None => Ok(weft_api::People::from_file_or_env(None)?),
        }
    }

    /// The MCP servers for every flow (none when the file's are unusable: they were checked
    /// when typed, so only a hand-edited file gets here).
    pub fn mcp_servers(&self) -> weft_mcp::Servers {
        weft_mcp::parse_servers(self.mcp_servers.as_ref()).unwrap_or_default()
    }

    /// Sets (or, with an empty value, removes) a variable that MCP server definitions read as
    /// `${NAME}`. Provider settings have fields of their own and are refused here.
    pub fn set_variable(&mut self, name: &str, value: &str) -> Result<(), AppError> {
        let name = name.trim();
        let refused = |message: String| AppError::new(ErrorCode::BadRequest, message);
        let well_formed = name
            .chars()
            .next()
            .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            return Err(refused(format!(
                "`{name}` cannot be a variable's name: use letters, digits and _ (like GITHUB_TOKEN)"
            )));
        }
        if Setting::ALL
            .iter()
            .any(|setting| setting.variable() == name)
        {
            return Err(refused(format!(
                "{name} is a provider setting: set it with the provider's fields above"
            )));
        }
        if value.is_empty() {
            self.values.remove(name);
        } else {
            self.values.insert(name.to_string(), value.to_string());
        }
        Ok(())
    }

    /// The names of the variables set for MCP servers (never their values).
    pub fn variables(&self) -> Vec<String> {
        self.values
            .keys()
            .filter(|name| {
                !Setting::ALL
                    .iter()
                    .any(|setting| setting.variable() == *name)
            })
            .cloned()
            .collect()
    }

    /// What `${NAME}` reads: a value set here, else the environment's.
    pub fn variable(&self, name: &str, env: impl Fn(&str) -> Option<String>) -> Option<String> {
        self.values
            .get(name)
            .filter(|value| !value.is_empty())
            .cloned()
            .or_else(|| env(name))
    }

    /// Who decides in this app: the name set in Settings, else who decides on this machine
    /// ([`weft_api::decider`]).
    pub fn user_name(&self, env: impl Fn(&str) -> Option<String>) -> Option<String> {
        weft_api::decider_from(self.get(Setting::UserName), env)
    }

    /// The engine's provider settings: this file first, then the environment.
    pub fn provider_settings(&self, env: impl Fn(&str) -> Option<String>) -> ProviderSettings {
        ProviderSettings::from_lookup(|name| {
            self.values
                .get(name)
                .filter(|v| !v.trim().is_empty())
                .cloned()
                .or_else(|| env(name))
        })
    }
}

/// Writes `bytes` to `path` with mode 0600, whole or not at all ([`weft_flow::replace_file`]):
/// a crash never leaves half a file and the content is never readable by others, even briefly.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    weft_flow::replace_file(path, bytes, weft_flow::Access::OwnerOnly)
}

/// The provider a key or address belongs to, for the settings panel.
pub fn provider_settings_of(provider: ProviderKind) -> (Option<Setting>, Setting) {
    match provider {
        ProviderKind::OpenAi => (Some(Setting::OpenAiKey), Setting::OpenAiBaseUrl),
        ProviderKind::Anthropic => (Some(Setting::AnthropicKey), Setting::AnthropicBaseUrl),
        ProviderKind::Ollama => (None, Setting::OllamaHost),
    }
}

/// Most recently opened or saved flow files, newest first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecentFiles {
    pub paths: Vec<String>,
}

/// How many recent files are remembered.
const MAX_RECENT: usize = 10;

impl RecentFiles {
    pub fn load(path: &Path) -> RecentFiles {
        // A broken list of recent files is not worth an error: start a new one.
        std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str(&text).ok())
            .unwrap_or_default()
    }

    pub fn touch(&mut self, file: &str) {
        self.paths.retain(|p| p != file);
        self.paths.insert(0, file.to_string());
        self.paths.truncate(MAX_RECENT);
    }

    pub fn save(&self, path: &Path) -> Result<(), AppError> {
        let text = serde_json::to_string_pretty(self).unwrap_or_default();
        write_private(path, text.as_bytes()).map_err(|e| {
            AppError::new(
                ErrorCode::Settings,
                format!("cannot write {}: {e}", path.display()),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_file_is_private_and_round_trips() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("nested/settings.json");
        let mut settings = SettingsFile::default();
        settings.set(Setting::OpenAiKey, "sk-secret");
        settings.set(Setting::OpenAiBaseUrl, "http://127.0.0.1:9/v1");
        settings.save(&path).expect("save");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(SettingsFile::load(&path).expect("load"), settings);
        settings.set(Setting::OpenAiKey, "  ");
        assert_eq!(settings.get(Setting::OpenAiKey), None);
    }

    #[test]
    fn file_values_win_over_the_environment() {
        let mut settings = SettingsFile::default();
        settings.set(Setting::OpenAiBaseUrl, "http://file/v1");
        let env = |name: &str| match name {
            "OPENAI_BASE_URL" => Some("http://env/v1".to_string()),
            "ANTHROPIC_BASE_URL" => Some("http://env-anthropic".to_string()),
            _ => None,
        };
        let resolved = settings.provider_settings(env);
        assert_eq!(resolved.openai_base_url, "http://file/v1");
        assert_eq!(resolved.anthropic_base_url, "http://env-anthropic");
    }

    #[test]
    fn a_broken_settings_file_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("settings.json");
        std::fs::write(&path, "{ nope").expect("write");
        let error = SettingsFile::load(&path).expect_err("broken file");
        assert_eq!(error.code, ErrorCode::Settings);
        assert!(error.message.contains("settings.json"), "{}", error.message);
    }

    #[test]
    fn prices_typed_in_settings_replace_the_shipped_ones_and_bad_ones_are_named() {
        let mut settings = SettingsFile::default();
        let shipped = Prices::shipped()
            .price("openai/gpt-4o")
            .expect("a shipped price");
        settings
            .set_prices(r#"{"openai/gpt-4o": {"input": 1, "output": 2}, "ollama/llama3": {"input": 0, "output": 0}}"#)
            .expect("a valid table");
        let prices = settings.prices().expect("prices");
        let mine = prices.price("openai/gpt-4o").expect("overridden");
        assert_ne!(mine, shipped);
        assert_eq!((mine.input, mine.output), (1.0, 2.0));
        assert!(prices.price("ollama/llama3").is_some());
        // It survives the file.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("settings.json");
        settings.save(&path).expect("save");
        assert_eq!(SettingsFile::load(&path).expect("load"), settings);

        let error = settings
            .set_prices("{\n  \"openai/gpt-4o\": {\"input\": 1,}\n}")
            .expect_err("a syntax error");
        assert!(error.message.contains("line 2"), "{}", error.message);
        let error = settings
            .set_prices(r#"{"openai/gpt-4o": {"input": -1, "output": 2}}"#)
            .expect_err("a negative price");
        assert!(
            error.message.contains("`openai/gpt-4o`: `input`"),
            "{}",
            error.message
        );
        // A refused table leaves the one before.
        assert_eq!(
            settings.prices().expect("prices").price("openai/gpt-4o"),
            Some(mine)
        );
        settings.set_prices("  ").expect("cleared");
        assert_eq!(
            settings.prices().expect("prices").price("openai/gpt-4o"),
            Some(shipped)
        );
    }

    #[test]
    fn mcp_servers_and_variables_typed_in_settings_are_checked_and_kept() {
        let mut settings = SettingsFile::default();
        settings
            .set_mcp_servers(r#"{"tracker": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"}}}"#)
            .expect("a valid server");
        assert_eq!(settings.mcp_servers().len(), 1);
        let error = settings
            .set_mcp_servers(r#"{"both": {"command": "x", "url": "http://y"}}"#)
            .expect_err("command and url");
        assert!(
            error.message.contains("settings.mcpServers.both"),
            "{}",
            error.message
        );
        assert_eq!(
            settings.mcp_servers().len(),
            1,
            "a refused list leaves the one before"
        );

        settings
            .set_variable("TRACKER_TOKEN", "t-secret")
            .expect("a variable");
        settings.set(Setting::OpenAiKey, "sk-secret");
        assert_eq!(settings.variables(), ["TRACKER_TOKEN"]);
        assert_eq!(
            settings.variable("TRACKER_TOKEN", |_| Some("from-env".into())),
            Some("t-secret".into())
        );
        assert_eq!(
            settings.variable("HOME_DIR", |_| Some("from-env".into())),
            Some("from-env".into())
        );
        assert!(settings.set_variable("OPENAI_API_KEY", "x").is_err());
        assert!(settings.set_variable("not a name", "x").is_err());

        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("settings.json");
        settings.save(&path).expect("save");
        assert_eq!(SettingsFile::load(&path).expect("load"), settings);
        settings.set_variable("TRACKER_TOKEN", "").expect("removed");
        assert!(settings.variables().is_empty());
        settings.set_mcp_servers(" ").expect("cleared");
        assert!(settings.mcp_servers().is_empty());
    }

    #[test]
    fn recent_files_are_newest_first_without_duplicates() {
        let mut recent = RecentFiles::default();
        for name in ["a", "b", "a", "c"] {
            recent.touch(name);
        }
        assert_eq!(recent.paths, ["c", "a", "b"]);
    }
}
