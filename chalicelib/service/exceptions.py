"""SQS errors: each carries its wire code, its legacy query code and HTTP status."""

from __future__ import annotations


class SqsError(Exception):
    """An error that reaches the client as an SQS error response."""

    code: str = "InternalError"  # the botocore shape name where modelled
    query_code: str | None = None  # the legacy code sent in x-amzn-query-error
    json_type: str | None = None  # the JSON protocol's __type, where SQS's differs from code
    status: int = 400
    sender_fault: bool = True

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message

    @property
    def legacy_code(self) -> str:
        """The code older SDKs (and the Query protocol) know the error by."""
        return self.query_code or self.code

    @property
    def type_name(self) -> str:
        """The `__type` of a JSON error: SQS names a few unmodelled errors differently
        there (InvalidParameterValueException) than in x-amzn-query-error."""
        return self.json_type or self.code


class InvalidParameterValueError(SqsError):
    """A parameter has a value SQS rejects."""

    code = "InvalidParameterValue"
    json_type = "InvalidParameterValueException"


class MissingParameterError(SqsError):
    """A required parameter is absent."""

    code = "MissingParameter"
    json_type = "MissingRequiredParameterException"


class InvalidAttributeNameError(SqsError):
    """An attribute name is not one SQS knows."""

    code = "InvalidAttributeName"


class InvalidAttributeValueError(SqsError):
    """A queue attribute has a value SQS rejects."""

    code = "InvalidAttributeValue"


class QueueDoesNotExistError(SqsError):
    """The queue named by the request does not exist."""

    code = "QueueDoesNotExist"
    query_code = "AWS.SimpleQueueService.NonExistentQueue"

    def __init__(self, message: str = "The specified queue does not exist.") -> None:
        super().__init__(message)


class QueueNameExistsError(SqsError):
    """A queue of that name exists with other attributes."""

    code = "QueueNameExists"
    query_code = "QueueAlreadyExists"


class QueueDeletedRecentlyError(SqsError):
    """A queue of that name was deleted less than 60 seconds ago."""

    code = "QueueDeletedRecently"
    query_code = "AWS.SimpleQueueService.QueueDeletedRecently"


class ReceiptHandleIsInvalidError(SqsError):
    """The receipt handle is forged or garbled."""

    code = "ReceiptHandleIsInvalid"


class MessageNotInflightError(SqsError):
    """The message is not in flight, so its visibility cannot change."""

    code = "MessageNotInflight"
    query_code = "AWS.SimpleQueueService.MessageNotInflight"


class InvalidMessageContentsError(SqsError):
    """The body holds characters outside the allowed set."""

    code = "InvalidMessageContents"


class PurgeQueueInProgressError(SqsError):
    """The queue was purged less than 60 seconds ago (HTTP 403, as SQS answers it)."""

    code = "PurgeQueueInProgress"
    query_code = "AWS.SimpleQueueService.PurgeQueueInProgress"
    status = 403


class TooManyEntriesInBatchRequestError(SqsError):
    """A batch holds more than 10 entries."""

    code = "TooManyEntriesInBatchRequest"
    query_code = "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"


class EmptyBatchRequestError(SqsError):
    """A batch holds no entries."""

    code = "EmptyBatchRequest"
    query_code = "AWS.SimpleQueueService.EmptyBatchRequest"


class BatchEntryIdsNotDistinctError(SqsError):
    """Two entries of a batch share an Id."""

    code = "BatchEntryIdsNotDistinct"
    query_code = "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"


class InvalidBatchEntryIdError(SqsError):
    """A batch entry Id breaks the Id rules."""

    code = "InvalidBatchEntryId"
    query_code = "AWS.SimpleQueueService.InvalidBatchEntryId"


class BatchRequestTooLongError(SqsError):
    """The batch's messages add up to more than the size limit."""

    code = "BatchRequestTooLong"
    query_code = "AWS.SimpleQueueService.BatchRequestTooLong"


class OverLimitError(SqsError):
    """A per-queue limit (permissions, in-flight messages) would be exceeded."""

    code = "OverLimit"
    status = 403


class UnsupportedOperationError(SqsError):
    """The operation is not supported for this queue."""

    code = "UnsupportedOperation"
    query_code = "AWS.SimpleQueueService.UnsupportedOperation"


class ResourceNotFoundError(SqsError):
    """A resource named by the request (a move task's queue, or the task) does not exist."""

    code = "ResourceNotFoundException"
    status = 404


class InvalidActionError(SqsError):
    """The action is not one DMQ serves."""

    code = "InvalidAction"


class RequestThrottledError(SqsError):
    """The store is throttling; the client should retry."""

    code = "RequestThrottled"


class SignatureDoesNotMatchError(SqsError):
    """The request's signature does not hold, or its credential scope names a region this
    deployment does not serve (AWS answers both with this code)."""

    code = "SignatureDoesNotMatch"
    status = 403


class ServiceUnavailableError(SqsError):
    """The store did not answer in time; the client should retry."""

    code = "ServiceUnavailable"
    status = 503
    sender_fault = False


class FailoverRefusedError(SqsError):
    """Marking a region down would leave no healthy region to take over its queues."""

    code = "FailoverRefused"
    status = 409


class InternalError(SqsError):
    """An unexpected failure inside DMQ."""

    code = "InternalError"
    status = 500
    sender_fault = False


# -- authentication and authorization (SigV4, access keys, queue policies) ---------------
class InvalidClientTokenIdError(SqsError):
    """The access key id is not one DMQ knows (or it was revoked)."""

    code = "InvalidClientTokenId"
    status = 403

    def __init__(
        self, message: str = "The security token included in the request is invalid.",
    ) -> None:
        super().__init__(message)


class IncompleteSignatureError(SqsError):
    """The signature lacks a part SigV4 requires (credential, signed headers, date...)."""

    code = "IncompleteSignature"


class RequestExpiredError(SqsError):
    """The request's date is outside the allowed clock skew, or a presigned URL expired."""

    code = "RequestExpired"


class MissingAuthenticationTokenError(SqsError):
    """An unsigned request where authentication is required."""

    code = "MissingAuthenticationToken"
    status = 403

    def __init__(
        self, message: str = "The request must contain either a valid (registered) AWS "
        "access key ID or X.509 certificate.",
    ) -> None:
        super().__init__(message)


class AccessDeniedError(SqsError):
    """The caller may not perform the action on the queue."""

    code = "AccessDenied"
    status = 403


class RateThrottledError(RequestThrottledError):
    """The caller's account or the queue is over its configured request rate. SQS answers
    this RequestThrottled with HTTP 403 (a Sender fault), which botocore retries in its
    legacy and standard retry modes alike."""

    status = 403
    retry_after_s = 0.0  # when the refusing bucket's next token is due, if known


# -- encryption at rest --------------------------------------------------------------------
# The key service's refusals, as SQS reports them: the botocore shape name, and the legacy
# code of the Query protocol.
KMS_QUERY_CODES = {
    "KmsNotFound": "KMS.NotFoundException",
    "KmsAccessDenied": "KMS.AccessDeniedException",
    "KmsDisabled": "KMS.DisabledException",
    "KmsInvalidState": "KMS.InvalidStateException",
    "KmsInvalidKeyUsage": "KMS.InvalidKeyUsageException",
    "KmsThrottled": "KMS.ThrottlingException",
    "KmsOptInRequired": "KMS.OptInRequired",
}


class KmsError(SqsError):
    """The key service refused to make or open a queue's data key."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(message)
        self.code = code if code in KMS_QUERY_CODES else "KmsInvalidState"
        self.query_code = KMS_QUERY_CODES[self.code]
