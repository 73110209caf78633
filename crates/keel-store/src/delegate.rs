//! [`delegate_store!`]: `Store` methods that pass straight through to an inner store, for
//! wrappers that change only a few (a subagent's view of its parent's store, the server load
//! bench's timing wrapper). Name the methods to pass through; write the others by hand.

/// Inside `impl Store for Wrapper`, `delegate_store!(field; method method …)` writes each
/// named method as a call to the same method of `self.field` (any `Store`).
#[macro_export]
macro_rules! delegate_store {
    ($inner:ident; $($method:ident)*) => {
        $( $crate::delegate_store!(@one $inner $method); )*
    };
    (@one $i:ident create_session) => {
        fn create_session<'a>(&'a self, session: &'a $crate::NewSession) -> $crate::StoreFuture<'a, ()> {
            self.$i.create_session(session)
        }
    };
    (@one $i:ident update_session) => {
        fn update_session<'a>(
            &'a self,
            id: &'a str,
            status: $crate::__protocol::SessionStatus,
            iterations: u32,
            usage: &'a $crate::__protocol::Usage,
        ) -> $crate::StoreFuture<'a, ()> {
            self.$i.update_session(id, status, iterations, usage)
        }
    };
    (@one $i:ident set_session_task) => {
        fn set_session_task<'a>(&'a self, id: &'a str, task: &'a str) -> $crate::StoreFuture<'a, ()> {
            self.$i.set_session_task(id, task)
        }
    };
    (@one $i:ident set_session_model) => {
        fn set_session_model<'a>(
            &'a self,
            id: &'a str,
            provider: &'a str,
            model: &'a str,
            mode: &'a str,
        ) -> $crate::StoreFuture<'a, ()> {
            self.$i.set_session_model(id, provider, model, mode)
        }
    };
    (@one $i:ident delete_session) => {
        fn delete_session<'a>(&'a self, id: &'a str) -> $crate::StoreFuture<'a, ()> {
            self.$i.delete_session(id)
        }
    };
    (@one $i:ident append_event) => {
        fn append_event<'a>(
            &'a self,
            event: &'a $crate::__protocol::Event,
        ) -> $crate::StoreFuture<'a, $crate::__protocol::Event> {
            self.$i.append_event(event)
        }
    };
    (@one $i:ident append_message) => {
        fn append_message<'a>(
            &'a self,
            session_id: &'a str,
            message: &'a $crate::__protocol::Message,
        ) -> $crate::StoreFuture<'a, ()> {
            self.$i.append_message(session_id, message)
        }
    };
    (@one $i:ident list_sessions) => {
        fn list_sessions(&self, limit: usize) -> $crate::StoreFuture<'_, Vec<$crate::SessionRecord>> {
            self.$i.list_sessions(limit)
        }
    };
    (@one $i:ident get_session) => {
        fn get_session<'a>(&'a self, id_or_prefix: &'a str) -> $crate::StoreFuture<'a, $crate::SessionRecord> {
            self.$i.get_session(id_or_prefix)
        }
    };
    (@one $i:ident events) => {
        fn events<'a>(
            &'a self,
            session_id: &'a str,
            since_seq: u64,
        ) -> $crate::StoreFuture<'a, Vec<$crate::__protocol::Event>> {
            self.$i.events(session_id, since_seq)
        }
    };
    (@one $i:ident messages) => {
        fn messages<'a>(
            &'a self,
            session_id: &'a str,
        ) -> $crate::StoreFuture<'a, Vec<$crate::__protocol::Message>> {
            self.$i.messages(session_id)
        }
    };
    (@one $i:ident last_seq) => {
        fn last_seq<'a>(&'a self, session_id: &'a str) -> $crate::StoreFuture<'a, u64> {
            self.$i.last_seq(session_id)
        }
    };
    (@one $i:ident create_blocker) => {
        fn create_blocker<'a>(&'a self, blocker: &'a $crate::NewBlocker) -> $crate::StoreFuture<'a, ()> {
            self.$i.create_blocker(blocker)
        }
    };
    (@one $i:ident list_blockers) => {
        fn list_blockers<'a>(
            &'a self,
            session_id: Option<&'a str>,
            all: bool,
        ) -> $crate::StoreFuture<'a, Vec<$crate::BlockerRecord>> {
            self.$i.list_blockers(session_id, all)
        }
    };
    (@one $i:ident get_blocker) => {
        fn get_blocker<'a>(&'a self, id_or_prefix: &'a str) -> $crate::StoreFuture<'a, $crate::BlockerRecord> {
            self.$i.get_blocker(id_or_prefix)
        }
    };
    (@one $i:ident answer_blocker) => {
        fn answer_blocker<'a>(
            &'a self,
            id_or_prefix: &'a str,
            answer: &'a str,
        ) -> $crate::StoreFuture<'a, $crate::BlockerRecord> {
            self.$i.answer_blocker(id_or_prefix, answer)
        }
    };
    (@one $i:ident mark_blockers_delivered) => {
        fn mark_blockers_delivered<'a>(&'a self, ids: &'a [String]) -> $crate::StoreFuture<'a, ()> {
            self.$i.mark_blockers_delivered(ids)
        }
    };
    (@one $i:ident memory_entries) => {
        fn memory_entries(&self) -> $crate::StoreFuture<'_, Vec<$crate::MemoryEntry>> {
            self.$i.memory_entries()
        }
    };
    (@one $i:ident save_result) => {
        fn save_result<'a>(
            &'a self,
            session_id: &'a str,
            handle: &'a str,
            content: &'a str,
        ) -> $crate::StoreFuture<'a, ()> {
            self.$i.save_result(session_id, handle, content)
        }
    };
    (@one $i:ident stored_results) => {
        fn stored_results<'a>(
            &'a self,
            session_id: &'a str,
        ) -> $crate::StoreFuture<'a, Vec<(String, String)>> {
            self.$i.stored_results(session_id)
        }
    };
    (@one $i:ident acquire_lease) => {
        fn acquire_lease<'a>(
            &'a self,
            session_id: &'a str,
            holder: &'a str,
            ttl_ms: u64,
        ) -> $crate::StoreFuture<'a, bool> {
            self.$i.acquire_lease(session_id, holder, ttl_ms)
        }
    };
    (@one $i:ident renew_lease) => {
        fn renew_lease<'a>(
            &'a self,
            session_id: &'a str,
            holder: &'a str,
            ttl_ms: u64,
        ) -> $crate::StoreFuture<'a, bool> {
            self.$i.renew_lease(session_id, holder, ttl_ms)
        }
    };
    (@one $i:ident release_lease) => {
        fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> $crate::StoreFuture<'a, ()> {
            self.$i.release_lease(session_id, holder)
        }
    };
    (@one $i:ident lease) => {
        fn lease<'a>(&'a self, session_id: &'a str) -> $crate::StoreFuture<'a, Option<$crate::Lease>> {
            self.$i.lease(session_id)
        }
    };
    (@one $i:ident acquire_workspace_lease) => {
        fn acquire_workspace_lease<'a>(
            &'a self,
            workspace: &'a str,
            session_id: &'a str,
            holder: &'a str,
            ttl_ms: u64,
        ) -> $crate::StoreFuture<'a, bool> {
            self.$i.acquire_workspace_lease(workspace, session_id, holder, ttl_ms)
        }
    };
    (@one $i:ident renew_workspace_lease) => {
        fn renew_workspace_lease<'a>(
            &'a self,
            workspace: &'a str,
            holder: &'a str,
            ttl_ms: u64,
        ) -> $crate::StoreFuture<'a, bool> {
            self.$i.renew_workspace_lease(workspace, holder, ttl_ms)
        }
    };
    (@one $i:ident release_workspace_lease) => {
        fn release_workspace_lease<'a>(
            &'a self,
            workspace: &'a str,
            holder: &'a str,
        ) -> $crate::StoreFuture<'a, ()> {
            self.$i.release_workspace_lease(workspace, holder)
        }
    };
    (@one $i:ident workspace_lease) => {
        fn workspace_lease<'a>(
            &'a self,
            workspace: &'a str,
        ) -> $crate::StoreFuture<'a, Option<$crate::WorkspaceLease>> {
            self.$i.workspace_lease(workspace)
        }
    };
}
