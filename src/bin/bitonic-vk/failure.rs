//! How the command's failures map to exit codes: bad input 2, a failure while running 1.

use bitonic_vk::Error;

/// A failure: bad input (exit code 2) or a failure while running (exit code 1).
pub enum Failure {
    Input(anyhow::Error),
    Run(anyhow::Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        match e {
            Error::TooLarge { .. }
            | Error::LengthMismatch { .. }
            | Error::NoSuchDevice { .. }
            | Error::InvalidOption { .. }
            | Error::Unsupported { .. } => Failure::Input(e.into()),
            e => Failure::Run(e.into()),
        }
    }
}
