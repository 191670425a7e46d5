"""The approval server: approvers' own credentials, the calls the runtime holds for approval
with the exact arguments that will run, approve and reject forwarded to the runtime with the
runner approval credential, and the approvers' page (docs/approval-server.md)."""
