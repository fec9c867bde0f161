// Prints every broker and topic configuration key of the Kafka on the class path,
// one per line: section, name, type, update mode, default, validator (tab separated).
import org.apache.kafka.common.config.ConfigDef;
void row(String section, ConfigDef.ConfigKey k, String mode) {
    String dflt = k.defaultValue == ConfigDef.NO_DEFAULT_VALUE ? "<none>" : String.valueOf(k.defaultValue);
    String validator = k.validator == null ? "" : k.validator.toString();
    System.out.println(String.join("\t", section, k.name, k.type.toString(), mode,
        dflt.replaceAll("[\t\n]", " "), validator.replaceAll("[\t\n]", " ")));
}
// The update modes moved from the Scala object kafka.server.DynamicBrokerConfig (4.2) to a Java class (4.3).
@SuppressWarnings("unchecked")
java.util.Map<String, String> updateModes() throws Exception {
    try {
        return (java.util.Map<String, String>) Class.forName("org.apache.kafka.server.config.DynamicBrokerConfig")
            .getMethod("dynamicConfigUpdateModes").invoke(null);
    } catch (ClassNotFoundException e) {
        var scalaObject = Class.forName("kafka.server.DynamicBrokerConfig$");
        return (java.util.Map<String, String>) scalaObject.getMethod("dynamicConfigUpdateModes")
            .invoke(scalaObject.getField("MODULE$").get(null));
    }
}
var modes = updateModes();
for (var k : org.apache.kafka.server.config.AbstractKafkaConfig.CONFIG_DEF.configKeys().values()) {
    if (!k.internalConfig) row("broker", k, modes.getOrDefault(k.name, "read-only"));
}
var topicKeys = org.apache.kafka.storage.internals.log.LogConfig.configKeys();
for (var name : org.apache.kafka.storage.internals.log.LogConfig.nonInternalConfigNames()) {
    row("topic", topicKeys.get(name), "per-topic");
}
/exit
