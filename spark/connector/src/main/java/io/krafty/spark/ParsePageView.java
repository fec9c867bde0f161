package io.krafty.spark;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.IOException;
import java.time.ZoneOffset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;

/**
 * A Kafka record's value → (page, ts) of a JSON page view, or null when it is not one the job can count.
 *
 * <p>The job's parse, registered by krafty_spark.pageviews.parse_events. Spark's from_json read the job's
 * page views at half this speed (bench/test_spark_consume.py): it reads each value through a
 * character reader and builds every field. This reads the bytes with Jackson's byte parser, once, and
 * builds only the two fields the job counts. What it accepts is what from_json accepted for them:
 * a value that is one JSON object (a duplicated key: the last wins); {@code page} a string, a number or
 * a boolean, as its text; {@code ts} a string Spark reads as a timestamp (DateTimeUtils.stringToTimestamp,
 * zone-less ones in UTC, the job's session zone) or an integer of seconds since the epoch. {@code ts}
 * is returned in microseconds since the epoch. Other fields are skipped unread.
 */
public final class ParsePageView implements UDF1<byte[], Row> {
  private static final long serialVersionUID = 1L;
  private static final JsonFactory JSON = new JsonFactory();

  @Override
  public Row call(byte[] value) {
    if (value == null) {
      return null;
    }
    String page = null;
    Long micros = null;
    try (JsonParser parser = JSON.createParser(value)) {
      if (parser.nextToken() != JsonToken.START_OBJECT) {
        return null;
      }
      JsonToken token;
      while ((token = parser.nextToken()) == JsonToken.FIELD_NAME) {
        String name = parser.currentName();
        JsonToken field = parser.nextToken();
        if ("page".equals(name)) {
          page = text(parser, field);
        } else if ("ts".equals(name)) {
          micros = timestamp(parser, field);
        } else {
          parser.skipChildren();
        }
      }
      if (token != JsonToken.END_OBJECT || parser.nextToken() != null) {
        return null;
      }
    } catch (IOException notJson) {
      return null;
    }
    return RowFactory.create(page, micros);
  }

  private static String text(JsonParser parser, JsonToken field) throws IOException {
    if (field.isScalarValue() && field != JsonToken.VALUE_NULL) {
      return parser.getText();
    }
    parser.skipChildren();
    return null;
  }

  private static Long timestamp(JsonParser parser, JsonToken field) throws IOException {
    if (field == JsonToken.VALUE_STRING) {
      Option<Object> micros = DateTimeUtils.stringToTimestamp(UTF8String.fromString(parser.getText()), ZoneOffset.UTC);
      return micros.isEmpty() ? null : (Long) micros.get();
    }
    if (field == JsonToken.VALUE_NUMBER_INT) {
      try {
        return Math.multiplyExact(parser.getLongValue(), 1_000_000L);
      } catch (ArithmeticException beyondTimestamps) {
        return null;
      }
    }
    parser.skipChildren();
    return null;
  }
}
