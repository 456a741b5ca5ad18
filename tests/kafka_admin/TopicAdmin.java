import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;

/**
 * The tests' one Kafka admin client for a session (tests/kafka.py): makes topics on the shared
 * broker as asked on standard input, so that each topic costs a request, not a JVM of Kafka's
 * own {@code kafka-topics} tool.
 *
 * <p>Run by Java's source launcher on the broker's class path, with the broker's bootstrap
 * servers as its argument. Each input line is {@code create PARTITIONS NAME...}; it answers each
 * with one line, {@code ok} once the broker has made every topic (as {@code kafka-topics
 * --create} waits for it), or {@code error MESSAGE}. It ends at the end of its input.
 */
public final class TopicAdmin {
  public static void main(String[] args) throws Exception {
    Properties settings = new Properties();
    settings.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    try (Admin admin = Admin.create(settings);
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      System.out.println("ready");
      String line;
      while ((line = in.readLine()) != null) {
        System.out.println(answer(admin, line.trim().split("\\s+")));
      }
    }
  }

  private static String answer(Admin admin, String[] words) {
    if (words.length < 3 || !words[0].equals("create")) {
      return "error expected 'create PARTITIONS NAME...', got " + String.join(" ", words);
    }
    try {
      int partitions = Integer.parseInt(words[1]);
      List<NewTopic> topics = new ArrayList<>();
      for (String name : Arrays.asList(words).subList(2, words.length)) {
        topics.add(new NewTopic(name, partitions, (short) 1));
      }
      admin.createTopics(topics).all().get();
      return "ok";
    } catch (Exception e) {
      Throwable cause = e.getCause() != null ? e.getCause() : e;
      return ("error " + cause).replace('\n', ' ');
    }
  }
}
