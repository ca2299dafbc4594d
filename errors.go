package kstream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrorKind says at which step a record failed.
type ErrorKind int

const (
	// DeserializationError: the key or value bytes of an input record could not be decoded.
	DeserializationError ErrorKind = iota + 1
	// ProcessingError: an operator returned an error or panicked.
	ProcessingError
	// ProductionError: an output record could not be serialized or Kafka rejected it.
	ProductionError
)

// String returns "deserialization", "processing" or "production".
func (k ErrorKind) String() string {
	switch k {
	case DeserializationError:
		return "deserialization"
	case ProcessingError:
		return "processing"
	case ProductionError:
		return "production"
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// ErrorContext describes a failed record to an [ErrorHandler].
type ErrorContext struct {
	Kind ErrorKind
	// Topic, Partition and Offset locate the input record (Offset is -1 when there is none).
	Topic     string
	Partition int32
	Offset    int64
	// Operator is the name of the operator that failed.
	Operator string
	// SinkTopic is the output topic, for production errors.
	SinkTopic string
	// Key, Value and Headers are the raw input record (for production errors with no input
	// record, the serialized output record).
	Key, Value []byte
	Headers    []Header
	// Timestamp is the input record's timestamp (for production errors with no input
	// record, the output record's); dead-letter records carry it, as in Kafka Streams.
	Timestamp time.Time
	Err       error
}

// ErrorHandler decides what happens to a record that failed. It is called from task
// goroutines and from the producer's callbacks, so it must be safe for concurrent use.
type ErrorHandler interface {
	HandleError(ec ErrorContext) ErrorResponse
}

// ErrorHandlerFunc adapts a function to [ErrorHandler].
type ErrorHandlerFunc func(ec ErrorContext) ErrorResponse

// HandleError calls f.
func (f ErrorHandlerFunc) HandleError(ec ErrorContext) ErrorResponse { return f(ec) }

// ErrorResponse is an [ErrorHandler]'s decision. Build one with [Fail], [Continue] or
// [DeadLetter].
type ErrorResponse struct {
	action     int // 0 fail, 1 continue, 2 dead letter
	deadLetter string
}

// Fail stops the application: [App.Run] returns the error.
func Fail() ErrorResponse { return ErrorResponse{} }

// Continue skips the failed record (for a processing error, only the failing operator's
// part of it: sibling operators still see the record) and goes on.
func Continue() ErrorResponse { return ErrorResponse{action: 1} }

// DeadLetter writes the raw record to topic, with headers naming the error and where it
// happened (see [DeadLetterQueue]), and goes on.
func DeadLetter(topic string) ErrorResponse { return ErrorResponse{action: 2, deadLetter: topic} }

// LogAndFail logs the error and stops the application. It is the default for every kind.
func LogAndFail() ErrorHandler { return logAndFail{} }

// logAndFail is the handler of [LogAndFail]; the error that stops the application then
// names the handlers that would skip or dead-letter the record instead.
type logAndFail struct{}

func (logAndFail) HandleError(ErrorContext) ErrorResponse { return Fail() }

// handlerHint is what a [RecordError] of kind k adds when its handler was [LogAndFail]:
// the Config field to set and the handlers that would not stop the application.
func handlerHint(k ErrorKind) string {
	field := map[ErrorKind]string{
		DeserializationError: "Config.DeserializationErrorHandler",
		ProcessingError:      "Config.ProcessingErrorHandler",
		ProductionError:      "Config.ProductionErrorHandler",
	}[k]
	if field == "" {
		return ""
	}
	return field + " is LogAndFail, the default: set it to kstream.LogAndContinue() to skip such a record, or to kstream.DeadLetterQueue(topic) to write it to a dead-letter topic"
}

// LogAndContinue logs the error and skips the record.
func LogAndContinue() ErrorHandler {
	return ErrorHandlerFunc(func(ErrorContext) ErrorResponse { return Continue() })
}

// DeadLetterQueue writes every failed record to topic and goes on. The dead-letter record
// is the one Kafka Streams writes (KIP-1034), so that tools written for Java dead-letter
// topics read it: the failed input record's raw key and value and timestamp, its original
// headers, then these headers (values in UTF-8):
//
//	__streams.errors.exception   the Go type of the error's root cause ("panic(T)" for a panic)
//	__streams.errors.message     the error text
//	__streams.errors.stacktrace  the chain of wrapped errors, Java's "Caused by:" style, and
//	                             for a panic the goroutine's stack
//	__streams.errors.topic       input topic
//	__streams.errors.partition   input partition (decimal)
//	__streams.errors.offset      input offset (decimal; -1 when there is no input record)
//
// and kstream's own, under their own prefix:
//
//	kstream.error.kind       deserialization, processing or production
//	kstream.error.operator   the operator that failed
//	kstream.error.sink.topic the output topic (production errors only)
//
// The dead-letter topic must exist: [App.Run] checks it at start, as it checks sink topics,
// and fails naming the topic and the handler if it does not. A failure to write to it stops
// the application.
func DeadLetterQueue(topic string) ErrorHandler { return deadLetterQueue{topic} }

// deadLetterQueue is the handler of [DeadLetterQueue].
type deadLetterQueue struct{ topic string }

func (d deadLetterQueue) HandleError(ErrorContext) ErrorResponse { return DeadLetter(d.topic) }

// deadLetterTopic names the topic a handler writes to, so that Run checks it at start.
func (d deadLetterQueue) deadLetterTopic() string { return d.topic }

// deadLetterTopicer is implemented by the handlers whose dead-letter topic is known before
// the first failure. Custom handlers list theirs in Config.DeadLetterTopics.
type deadLetterTopicer interface{ deadLetterTopic() string }

// Header keys of dead-letter records: Kafka Streams' (KIP-1034, written in this order after
// the record's own headers), then kstream's own.
const (
	HeaderErrorException  = "__streams.errors.exception"
	HeaderErrorMessage    = "__streams.errors.message"
	HeaderErrorStacktrace = "__streams.errors.stacktrace"
	HeaderErrorTopic      = "__streams.errors.topic"
	HeaderErrorPartition  = "__streams.errors.partition"
	HeaderErrorOffset     = "__streams.errors.offset"

	HeaderErrorKind      = "kstream.error.kind"
	HeaderErrorOperator  = "kstream.error.operator"
	HeaderErrorSinkTopic = "kstream.error.sink.topic"
)

// RecordError is a record failure that stopped the application. It names the record's
// coordinates and the operator; Unwrap returns the cause. A failure with no input record (in
// a punctuator) has an empty Topic and Offset -1.
type RecordError struct {
	Kind      ErrorKind
	Topic     string
	Partition int32
	Offset    int64
	Operator  string
	Err       error

	// hint, when set, says how to handle such failures without stopping (handlerHint).
	hint string
}

// Error names the failure's kind, operator and record coordinates, then the cause; when
// the handler was [LogAndFail], it ends naming the handlers that would have skipped or
// dead-lettered the record.
func (e *RecordError) Error() string {
	var msg string
	if e.Topic == "" && e.Offset < 0 {
		msg = fmt.Sprintf("kstream: %s error in operator %s (no input record, as in a punctuator): %v", e.Kind, e.Operator, e.Err)
	} else {
		msg = fmt.Sprintf("kstream: %s error in operator %s at topic %q partition %d offset %d: %v",
			e.Kind, e.Operator, e.Topic, e.Partition, e.Offset, e.Err)
	}
	if e.hint != "" {
		msg += " (" + e.hint + ")"
	}
	return msg
}

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }

// ErrNoSerde is returned (wrapped) when an operator needs serdes that the stream does not
// carry; set them with [Stream.WithSerdes].
var ErrNoSerde = errors.New("kstream: no serde")

func (ec ErrorContext) logAttrs() []any {
	attrs := []any{"kind", ec.Kind.String(), "operator", ec.Operator, "topic", ec.Topic, "partition", ec.Partition, "offset", ec.Offset}
	if ec.SinkTopic != "" {
		attrs = append(attrs, "sink_topic", ec.SinkTopic)
	}
	return append(attrs, "err", ec.Err)
}

// deadLetterHeaders returns the headers of a dead-letter record for ec.
func deadLetterHeaders(ec ErrorContext) []Header {
	h := append([]Header(nil), ec.Headers...)
	h = append(h,
		Header{HeaderErrorException, []byte(errorClass(ec.Err))},
		Header{HeaderErrorMessage, []byte(ec.Err.Error())},
		Header{HeaderErrorStacktrace, []byte(errorTrace(ec.Err))},
		Header{HeaderErrorTopic, []byte(ec.Topic)},
		Header{HeaderErrorPartition, []byte(strconv.FormatInt(int64(ec.Partition), 10))},
		Header{HeaderErrorOffset, []byte(strconv.FormatInt(ec.Offset, 10))},
		Header{HeaderErrorKind, []byte(ec.Kind.String())},
		Header{HeaderErrorOperator, []byte(ec.Operator)},
	)
	if ec.SinkTopic != "" {
		h = append(h, Header{HeaderErrorSinkTopic, []byte(ec.SinkTopic)})
	}
	return h
}

// panicError is a panic recovered in an operator or a serde, with the goroutine's stack.
type panicError struct {
	value any
	stack []byte
}

func (p *panicError) Error() string { return fmt.Sprintf("panic: %v", p.value) }

// Unwrap returns the panic value when it is an error (a runtime error, a panic(err)).
func (p *panicError) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// unwrapOnce returns the error err wraps (the first of joined errors), or nil.
func unwrapOnce(err error) error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return u.Unwrap()
	case interface{ Unwrap() []error }:
		if errs := u.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}

// rootCause follows err's chain of wrapped errors to its end.
func rootCause(err error) error {
	for next := unwrapOnce(err); next != nil; next = unwrapOnce(err) {
		err = next
	}
	return err
}

// errorClass is the dead-letter header's stand-in for Java's exception class name: the Go
// type of err's root cause, or "panic(T)" for a panic with a value of type T.
func errorClass(err error) string {
	var p *panicError
	if errors.As(err, &p) {
		return fmt.Sprintf("panic(%T)", p.value)
	}
	return fmt.Sprintf("%T", rootCause(err))
}

// errorTrace is the dead-letter header's stand-in for Java's stack trace: err and the chain
// of errors it wraps, one per line in Java's "Caused by:" style, then the goroutine's
// stack if err is a recovered panic.
func errorTrace(err error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%T: %s", err, err)
	for next := unwrapOnce(err); next != nil; next = unwrapOnce(next) {
		fmt.Fprintf(&b, "\nCaused by: %T: %s", next, next)
	}
	var p *panicError
	if errors.As(err, &p) && len(p.stack) > 0 {
		b.WriteString("\n")
		b.Write(p.stack)
	}
	return b.String()
}
