//! [`AnswerSlot`]: the one answer a pooled call owes its connection —
//! given once, or, dropped unanswered, still counted done.

use std::sync::Arc;

use rpc_core::{RpcError, RpcResponse};
use rpc_transport::Reserved;

use super::PoolAnswers;
use crate::reply::frame::ReplyTo;

/// The right (and duty) to answer one pooled call of a connection. Dropped
/// without [`answer`](Self::answer) (the job was rejected or lost) it still
/// counts the call done, so the connection does not wait for it forever.
pub(crate) struct AnswerSlot {
    pub(super) answers: Option<Arc<PoolAnswers>>,
    pub(super) reply_to: ReplyTo,
    pub(super) reserved: Option<Reserved>,
}

impl AnswerSlot {
    /// Whom the answer goes to.
    pub fn reply_to(&self) -> ReplyTo {
        self.reply_to
    }

    /// Queues the call's answer for the connection task to write.
    pub fn answer(mut self, result: Result<RpcResponse, RpcError>) {
        // Built before the slot gives up its duty: a panic here still counts
        // the call done (on drop).
        let frame = match &self.answers {
            Some(answers) => self.reply_to.answer(result, &answers.compression),
            None => return,
        };
        if let Some(answers) = self.answers.take() {
            answers.deliver(Some(&frame), self.reserved.take());
        }
    }
}

impl Drop for AnswerSlot {
    fn drop(&mut self) {
        if let Some(answers) = self.answers.take() {
            answers.deliver(None, None);
        }
    }
}
