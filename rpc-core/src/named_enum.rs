//! [`named_enum!`](macro@crate::named_enum): the one way brisk's setting enums get
//! their names.
//!
//! A setting enum is written once with the name each value has in config
//! files and on the command line (and any aliases); the macro derives serde
//! with exactly those names, `ALL`, `name()`, `Display` and a `FromStr` whose
//! error is an [`RpcError::Config`](crate::RpcError::Config) naming the key and
//! listing the valid values. Parsing ignores ASCII case and surrounding space.

/// Declares a setting enum with its config names; see the module docs.
///
/// ```
/// rpc_core::named_enum! {
///     /// How loud.
///     #[derive(Default)]
///     pub enum Volume: "volume" {
///         /// Quietly.
///         #[default]
///         Low => "low" | "quiet",
///         /// Loudly.
///         High => "high",
///     }
/// }
/// assert_eq!(" QUIET ".parse::<Volume>().unwrap(), Volume::Low);
/// assert_eq!(Volume::High.to_string(), "high");
/// let err = "max".parse::<Volume>().unwrap_err().to_string();
/// assert!(err.contains("`volume`") && err.contains("low, high"), "{err}");
/// ```
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$m:meta])*
        $vis:vis enum $name:ident : $key:literal {
            $($(#[$vm:meta])* $variant:ident $(= $disc:literal)? => $text:literal $(| $alias:literal)*),+ $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        $vis enum $name {
            $($(#[$vm])* #[serde(rename = $text)] $(#[serde(alias = $alias)])* $variant $(= $disc)?),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The name used in configs and on the command line.
            pub fn name(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::RpcError;

            fn from_str(s: &str) -> Result<Self, $crate::RpcError> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($text $(| $alias)* => Ok($name::$variant),)+
                    other => Err($crate::RpcError::config(
                        $key,
                        format!("unknown value `{other}` (expected one of: {})",
                            [$($text),+].join(", ")),
                    )),
                }
            }
        }
    };
}
