// Loads a properties file the way Kafka loads server.properties (java.util.Properties.load on an
// InputStream: ISO-8859-1, other characters as backslash-u escapes) and prints each key and value
// base64-encoded, one pair a line.
import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.Properties;
import java.util.TreeSet;

public class LoadProperties {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        Base64.Encoder b64 = Base64.getEncoder();
        for (String key : new TreeSet<>(props.stringPropertyNames())) {
            System.out.println(b64.encodeToString(key.getBytes(StandardCharsets.UTF_8)) + " "
                + b64.encodeToString(props.getProperty(key).getBytes(StandardCharsets.UTF_8)));
        }
    }
}
